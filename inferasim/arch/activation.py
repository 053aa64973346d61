"""The activation peak of an engine's profiling forward, per GPU, from the architecture.

vLLM and ATOM size the KV pool after one dummy forward of ``max_num_batched_tokens`` tokens and
a sampler warm-up over ``max_num_seqs`` rows: the torch-allocator peak of that run is kept
out of the KV budget (engines.md 1.1 "Profile run", 1.3 "KV bytes"). This module estimates
that peak from the model's dims; it is an analytic estimate (bf16 activations, the tensors a
layer holds at once), not a measurement.

Terms, for T tokens on one GPU:
- the residual stream and the hidden states that survive every layer (2 x T x hidden);
- the largest single layer's transients: attention (q/k/v and output, heads / attention TP;
  MLA prefill decompresses k and v per head) or the FFN (gate+up, activation, down output);
  a fused-MoE kernel sizes its workspace for every token's top-k slots, at the full expert
  width under expert parallelism (the experts are whole on a rank) and width / TP otherwise;
- the sampler warm-up after the forward: ``rows x vocab`` fp32 logits and the copies the
  sampler makes of them (probabilities, a sort's values and int64 indices), twice the rows
  with a speculative method (the rejection sampler's dummy run: one draft per row).
The forward's transients are freed before the sampler runs, so the peak is the larger of the
two, with the final hidden states held across both.
"""

from __future__ import annotations

import attrs

from inferasim.arch.spec import ModelSpec

ACT_BYTES = 2          # bf16 activations
LOGIT_BYTES = 4        # the sampler works in fp32
# fp32-sized copies of the logits live at the sampler's peak: the logits, the softmax
# probabilities, a top-k/top-p sort's values and its int64 indices (two fp32 widths), and the
# scattered result. An estimate from the sampler's steps, not a measurement.
SAMPLER_LOGIT_COPIES = 5


@attrs.frozen
class ActivationPeak:
    """Bytes per GPU of the profiling run's peak and what makes it up."""

    hidden_bytes: float        # residual + hidden states, held through the run
    layer_bytes: float         # the largest layer's transients
    sampler_bytes: float       # the sampler warm-up's logits and their copies

    @property
    def forward_bytes(self) -> float:
        return self.hidden_bytes + self.layer_bytes

    @property
    def peak_bytes(self) -> float:
        # the final hidden states (1 of the 2 held widths) stay while the sampler runs
        return max(self.forward_bytes, self.hidden_bytes / 2 + self.sampler_bytes)


def _attention_bytes(model: ModelSpec, tokens: int, attn_tp: int) -> float:
    att, h = model.attention, model.hidden_size
    heads = max(1, model.num_attention_heads // attn_tp)
    if att.kind.startswith("mla") or att.kind == "dsv4_compressed":
        qk = (att.qk_nope_head_dim + att.qk_rope_head_dim) or att.head_dim
        v = att.v_head_dim or att.qk_nope_head_dim or att.head_dim
        # q, the k and v each head decompresses for prefill, and the output; plus the
        # low-rank inputs (q_lora, the latent) every rank computes in full
        per_token = heads * (qk + att.qk_nope_head_dim + v + v) \
            + att.q_lora_rank + att.kv_lora_rank + att.qk_rope_head_dim
    else:
        kv_heads = max(1, model.num_kv_heads // attn_tp)
        v = att.v_head_dim or att.head_dim
        per_token = heads * att.head_dim + kv_heads * (att.head_dim + v) + heads * v
    return tokens * (per_token + h) * ACT_BYTES  # + the normed input


def _ffn_bytes(model: ModelSpec, tokens: int, tp: int, ep: int) -> float:
    ffn, h = model.ffn, model.hidden_size
    normed = tokens * h * ACT_BYTES
    dense = tokens * 3 * (ffn.intermediate_size // tp) * ACT_BYTES + normed if (
        not ffn.is_moe or ffn.first_k_dense) else 0.0
    if not ffn.is_moe:
        return dense
    width = ffn.moe_intermediate_size if ep > 1 else ffn.moe_intermediate_size / tp
    # per top-k slot: gate+up (2 x width), the activation (width), the expert's output (h)
    routed = tokens * ffn.experts_per_token * (3 * width + h) * ACT_BYTES
    shared_width = ffn.shared_intermediate_size or ffn.n_shared_experts * ffn.moe_intermediate_size
    shared = tokens * 3 * (shared_width / tp) * ACT_BYTES
    return max(dense, routed + shared + normed)


def sampler_bytes(model: ModelSpec, rows: int, tp: int, speculative: bool) -> float:
    """The sampler warm-up's logits: fp32 rows x vocab and their copies, plus the vocab-
    parallel bf16 slice the lm_head writes before the gather."""
    rows = rows * (2 if speculative else 1)
    full = rows * model.vocab_size * LOGIT_BYTES * SAMPLER_LOGIT_COPIES
    return full + rows * (model.vocab_size / tp) * ACT_BYTES


def activation_peak(model: ModelSpec, *, tokens: int, sampler_rows: int, tp: int,
                    attn_tp: int, ep: int, speculative: bool) -> ActivationPeak:
    """The profiling run's peak per GPU for a forward of ``tokens`` tokens and a sampler
    warm-up of ``sampler_rows`` rows (min(max_num_seqs, tokens) in vLLM)."""
    layer = max(_attention_bytes(model, tokens, attn_tp), _ffn_bytes(model, tokens, tp, ep))
    hidden = 2 * tokens * model.hidden_size * ACT_BYTES
    return ActivationPeak(hidden_bytes=hidden, layer_bytes=layer,
                          sampler_bytes=sampler_bytes(model, sampler_rows, tp, speculative))
