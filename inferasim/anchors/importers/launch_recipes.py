"""The running limit InferenceMAX's runs were launched with, from their launch recipes: the
decode workers' of the disaggregated runs (Dynamo over TensorRT-LLM or SGLang, and AMD's
mori-sglang), and the single-node SGLang servers'.

The rows (``benchmarks_flat.csv``) record each pool's workers and layout but not the decode
workers' ``max_batch_size``. InferenceX sets it per run: its master config
(SemiAnalysisAI/InferenceX ``.github/configs/nvidia-master.yaml`` @ 0004cf5, read with the
search tool) lists, per GPU, precision, ISL/OSL and speculative method, each run's clients
(``conc-list``), both pools' workers and layout, and the recipe it launched
(``CONFIG_FILE=recipes/trtllm/<gpu>-<precision>/<shape>/<stp|mtp>/ctx<P>_gen<D>_<layout>_batch<B>
_eplb<E>_mtp<M>[_<conc>].yaml``). ``batch<B>`` is the decode workers' ``max_batch_size``
(read in one recipe, ``b300-fp8/1k1k/stp/ctx1_gen2_dp8_batch128_eplb0_mtp0_3072.yaml`` @ 792d8aa:
``decode.max_batch_size: 128`` with ``enable_attention_dp``, so per attention-DP rank; the
prefill workers' is 8). The recipes size it a little below the clients: B300 FP8 at 1,280
clients runs 3 workers x 8 ranks x 48 = 1,152 slots, at 16,384 clients 1 x 8 x 1,024 =
8,192, and a client beyond the slots waits a whole decode for one, which is the row's TTFT
(135.8 s against a 135 s decode at 16,384; docs/anchors.md, "The decode workers' running
limit").

A row takes the limit of the entry whose pools and clients it matches exactly; one the
config does not list (other runs of the month: the H200 rows of 2026-03-23) takes none.

The ISL 8192 / OSL 1024 entries (136, every GPU and precision the config runs under Dynamo
TensorRT-LLM) are read from the same file at the same commit, although this project holds no
8k/1k row: the data set keeps those rows aside to check projections (its README), and a
projection to them needs the limit each ran with as much as a 1k/1k one does. Four 8k/1k
per-client recipe files set another limit than their names (connorcarpenter15/srt-slurm @
5a156f6, the same in qiching/srt-slurm @ 5063eb4): ``b200-fp8/8k1k/mtp/ctx1_gen6_tp8_batch8
_eplb0_mtp3_8.yaml`` 1, ``..._gen2_tp8_batch32_..._8.yaml`` 4, ``b200-fp8/8k1k/stp/ctx1_gen4
_tp8_batch32_eplb0_mtp0_32.yaml`` 8 and ``b300-fp8/8k1k/stp/ctx1_gen8_tp8_batch2_eplb0_mtp0
_16.yaml`` 1; that file and ``b300-fp8/8k1k/mtp/ctx1_gen4_tp8_batch1_eplb0_mtp3_8.yaml`` run 10
and 5 clients where the config lists 16 and 8, so both counts are tabled. Two GB200 FP4 entries
(1 prefill, 4 decode workers) are tabled with attention DP, as the config and so the rows
state it, though their recipes (``..._tep8_...``) set ``enable_attention_dp: false``.

Where a recipe is written per client count (the B200 and B300 FP8 files whose names end in
``_<clients>``), its name keeps the template's ``batch<B>`` but its ``decode`` block sets the
limit that ran, and the two differ in three files read (connorcarpenter15/srt-slurm and
qiching/srt-slurm, forks of the recipes InferenceX launched, @ 5a156f6 and 5063eb4):
``b200-fp8/1k1k/stp/ctx1_gen3_tp8_batch1024_eplb0_mtp0_4.yaml`` sets ``max_batch_size: 1`` and
``..._32.yaml`` 12 (``..._128.yaml`` 1024, as named), and
``b300-fp8/1k1k/stp/ctx1_gen8_tp8_batch64_eplb0_mtp0_12.yaml`` sets 1 and runs 10 clients. The
table holds what the files set. At one slot a worker, a client routed to a busy worker waits a
whole decode for it: the B200 row at 4 clients on 3 workers measures a median TTFT of 1.8 s
against 0.24 s at 32 on 36 slots (docs/anchors.md, "The decode workers' running limit").

The Dynamo SGLang runs launched srt-slurm recipes (ishandhanani/srt-slurm), which do not name
their limit in the file name but set it in the file: every speculative (EAGLE/MTP) decode
worker read sets ``max-running-requests: 512`` (``recipes/b200-fp4/1k1k-mtp.yaml`` and
``recipes/b200-fp8/1k1k-mtp.yaml`` @ 893b9b9, ``recipes/b200-fp8/1k1k/mtp/max-tpt-dep8-1p2d.yaml``
@ 5bd0b3f, ``recipes/h100/1k1k/mtp/h100-fp8-2p4d-max-dep-mtp.yaml`` @ 6a30b5d). Without it SGLang
would cap a speculative worker at 48 running requests (engines.md), a limit no such run had.
SGLang divides a set value among its attention-DP ranks. The non-speculative recipes leave
the limit to SGLang's pool-derived default or set it far above the clients (GB300 FP4
max-throughput: 67,584), so they take none here.

AMD's mori-sglang runs read their flags from InferenceX's ``benchmarks/multi_node/amd_utils/
models.yaml``, which sets the decode workers' ``max_running_requests`` by mode
(``mori_decode_running``).

The single-node SGLang servers read their limit from InferenceX's
``benchmarks/single_node/fixed_seq_len/dsr1_*.sh`` (``colocated_sglang_running``): the
NVIDIA scripts pass one with or without a draft model (B200 FP8 128 at TP8 and 32 at the TP4
it runs only at 8k/1k, FP4 256, H200 512 at 1k/1k and 256 at other shapes); the AMD scripts
pass one only with a draft model, and without one SGLang would run 48. The MI355X FP4 scripts
also shrink their step budget at 8k/1k past 32 clients (``colocated_sglang_budget``).
"""

from __future__ import annotations

import attrs

from inferasim.config.engine_defaults import sglang_running_per_rank

#: gpu, precision, ISL, OSL, speculative method, prefill workers, decode workers, decode TP,
#: decode attention (dpa: attention-DP ranks, tp: tensor parallel), max_batch_size, clients.
RECIPES = """
b200   fp4 1024 1024 mtp   1  2  8 dpa    64  1214
b200   fp4 1024 1024 mtp   1  5  8 dpa    16  875
b200   fp4 1024 1024 mtp   1  5  8 tp      1  6
b200   fp4 1024 1024 mtp   1  5  8 tp     32  10,15,25,45,90,180
b200   fp4 1024 1024 mtp   3  4  8 dpa   128  4968
b200   fp4 1024 1024 mtp   3  5  4 dpa   512  10860
b200   fp4 1024 1024 none  1  1  8 dpa   512  4096
b200   fp4 1024 1024 none  1  2  8 dpa   128  2192
b200   fp4 1024 1024 none  1  5  8 dpa    32  1365
b200   fp4 1024 1024 none  1  5  8 tp      1  6
b200   fp4 1024 1024 none  1  5  8 tp     32  10,15,25,45,90,180
b200   fp4 1024 1024 none  1  6  8 tp     64  450
b200   fp8 1024 1024 mtp   1  8  8 tp      1  8
b200   fp8 1024 1024 mtp   1  8  8 tp      4  32
b200   fp8 1024 1024 mtp   1  8  8 tp      8  64
b200   fp8 1024 1024 mtp   1  8  8 tp     32  256
b200   fp8 1024 1024 mtp   1  7  8 dpa   128  896
b200   fp8 1024 1024 mtp   1  4  8 dpa   256  1024
b200   fp8 1024 1024 mtp   1  3  8 dpa   384  1184
b200   fp8 1024 1024 mtp   1  2  8 dpa   768  1600
b200   fp8 1024 1024 none  1  3  8 tp      1  4
b200   fp8 1024 1024 none  1  3  8 tp     12  32
b200   fp8 1024 1024 none  1  3  8 tp   1024  128
b200   fp8 1024 1024 none  1  5  8 dpa    48  1920
b200   fp8 1024 1024 none  1  1  8 dpa   512  4096
b200   fp8 1024 1024 none  2  5  8 dpa   128  5152
b300   fp4 1024 1024 mtp   1  1  8 dpa    64  654
b300   fp4 1024 1024 mtp   1  2  8 dpa    16  271
b300   fp4 1024 1024 mtp   1  5  8 tp      1  11
b300   fp4 1024 1024 mtp   1  5  8 tp     32  10,20,25,60,120,200
b300   fp4 1024 1024 mtp   2  1  8 dpa   256  2342
b300   fp4 1024 1024 mtp   5  2  8 dpa   512  8609
b300   fp4 1024 1024 mtp   5  2  8 dpa   768  12926
b300   fp4 1024 1024 none  1  2  8 dpa    64  1176
b300   fp4 1024 1024 none  1  4  8 tp      1  6
b300   fp4 1024 1024 none  1  5  4 tp      4  5,10,15,25
b300   fp4 1024 1024 none  1  5  8 tp     64  60,110,195,395
b300   fp4 1024 1024 none  2  1  8 dpa   512  4405
b300   fp4 1024 1024 none  3  1  8 dpa  1024  8192
b300   fp4 1024 1024 none  3  2  8 dpa   256  4611
b300   fp8 1024 1024 mtp   1  8  8 tp      1  10
b300   fp8 1024 1024 mtp   1  8  8 tp     16  160
b300   fp8 1024 1024 mtp   1  1  8 dpa   256  3072
b300   fp8 1024 1024 mtp   1  2  8 dpa   128  2560
b300   fp8 1024 1024 mtp   1  5  8 dpa    16  720
b300   fp8 1024 1024 mtp   3  2  8 dpa   512  11264
b300   fp8 1024 1024 none  1  1  8 dpa   256  2112
b300   fp8 1024 1024 none  1  2  8 dpa   128  3072
b300   fp8 1024 1024 none  1  3  8 dpa    48  1280
b300   fp8 1024 1024 none  1  8  8 tp      1  10
b300   fp8 1024 1024 none  1  8  8 tp     64  12
b300   fp8 1024 1024 none  1  8  8 tp     64  128
b300   fp8 1024 1024 none  1  8  8 tp     64  384
b300   fp8 1024 1024 none  2  1  8 dpa  1024  16384
h200   fp8 1024 1024 mtp   1 11  8 tp      1  1
h200   fp8 1024 1024 mtp   1 11  8 tp    128  4,8,32
h200   fp8 1024 1024 mtp   1  9  8 tp    128  16
h200   fp8 1024 1024 mtp   1  8  8 dpa   128  64
h200   fp8 1024 1024 mtp   1  7  8 dpa   128  128
h200   fp8 1024 1024 mtp   1  4  8 dpa   128  256
h200   fp8 1024 1024 mtp   1  2  8 dpa   256  512
h200   fp8 1024 1024 none  1  9  8 tp      1  1
h200   fp8 1024 1024 none  1  9  8 tp    256  4,8,16,32,64
h200   fp8 1024 1024 none  1  9  8 dpa   512  128
h200   fp8 1024 1024 none  1  6  8 dpa   512  256
h200   fp8 1024 1024 none  2  7  8 dpa   512  512
h100   fp8 1024 1024 mtp   1  3 16 tp      1  6
h100   fp8 1024 1024 mtp   1  3 16 tp      2  9
h100   fp8 1024 1024 mtp   1  3 16 tp      8  30
h100   fp8 1024 1024 mtp   1  3 16 tp     16  60
h100   fp8 1024 1024 mtp   1  3 16 tp     32  117
h100   fp8 1024 1024 mtp   1  3 16 dpa     4  231
h100   fp8 1024 1024 mtp   1  3 16 tp    128  462
h100   fp8 1024 1024 mtp   1  1 16 dpa    32  615
h100   fp8 1024 1024 mtp   1  1 16 dpa    64  1229
h100   fp8 1024 1024 none  1  3 16 tp      1  6
h100   fp8 1024 1024 none  1  3 16 tp      2  9
h100   fp8 1024 1024 none  1  3 16 tp      8  30
h100   fp8 1024 1024 none  1  3 16 tp     16  60
h100   fp8 1024 1024 none  1  3 16 dpa     4  231
h100   fp8 1024 1024 none  1  3 16 dpa     8  462
h100   fp8 1024 1024 none  1  3 16 dpa    16  924
h100   fp8 1024 1024 none  1  3 16 dpa    32  1845
h100   fp8 1024 1024 none  2  1 16 dpa   256  4916
gb200  fp4 1024 1024 mtp   1  1 32 dpa     4  180
gb200  fp4 1024 1024 mtp   1  4  8 tp      8  4,8,12,24,48
gb200  fp4 1024 1024 mtp   2  1 16 dpa   256  4301
gb200  fp4 1024 1024 mtp   3  1 32 dpa    64  2253
gb200  fp4 1024 1024 mtp   3  5  4 dpa   768  16130
gb200  fp4 1024 1024 none  1  1  8 dpa   512  4301
gb200  fp4 1024 1024 none  1  1 32 dpa    16  666
gb200  fp4 1024 1024 none  1  2  4 dpa   768  6144
gb200  fp4 1024 1024 none  1  4  8 tp     32  12,24,48,96,192
gb200  fp4 1024 1024 none  1  4  8 tp      1  5
gb200  fp4 1024 1024 none  2  1 16 dpa   256  4301
gb200  fp4 1024 1024 none  2  1 32 dpa    64  2253
gb200  fp4 1024 8192 mtp   1  7  8 tp      4  4,8,12,24,48
gb200  fp4 1024 8192 mtp   1  7  8 tp      1  7
gb200  fp4 1024 8192 mtp   1  1 32 dpa     4  128
gb200  fp4 1024 8192 mtp   1  1 32 dpa    16  512
gb200  fp4 1024 8192 mtp   1  3 16 dpa    64  3072
gb200  fp4 1024 8192 mtp   1  3 16 dpa   128  6144
gb200  fp4 1024 8192 mtp   1  1 32 dpa   256  8192
gb200  fp4 1024 8192 none  1  7  8 tp      1  5
gb200  fp4 1024 8192 none  1 15  4 tp      4  60
gb200  fp4 1024 8192 none  1 15  4 tp      8  135
gb200  fp4 1024 8192 none  1  1 32 dpa    16  563
gb200  fp4 1024 8192 none  1  1 32 dpa    64  2048
gb200  fp4 1024 8192 none  1  1 32 dpa   128  4096
gb200  fp4 1024 8192 none  1  1 32 dpa   256  8192
gb200  fp8 1024 1024 mtp   1  1  8 dpa   512  4301
gb200  fp8 1024 1024 mtp   1  1  8 dpa   256  2151
gb200  fp8 1024 1024 mtp   1  1 16 dpa    64  1229
gb200  fp8 1024 1024 mtp   1  1 32 dpa    16  615
gb200  fp8 1024 1024 mtp   1  3  8 tp      8  36
gb200  fp8 1024 1024 mtp   1  3  8 tp      4  18
gb200  fp8 1024 1024 mtp   1  3  8 tp      2  9
gb200  fp8 1024 1024 none  1  1  8 dpa   768  6144
gb200  fp8 1024 1024 none  1  1  8 dpa   512  4301
gb200  fp8 1024 1024 none  1  1 16 dpa   128  2151
gb200  fp8 1024 1024 none  1  1 32 dpa    32  1127
gb200  fp8 1024 1024 none  1  1 32 dpa     8  256
gb200  fp8 1024 1024 none  1  3  8 tp      8  27
gb200  fp8 1024 1024 none  1  3  8 tp      1  3
gb200  fp8 1024 8192 mtp   1  2 16 dpa   256  8192
gb200  fp8 1024 8192 mtp   1  2 16 dpa    64  2152
gb200  fp8 1024 8192 mtp   1  1 32 dpa    16  564
gb200  fp8 1024 8192 mtp   1  1 32 dpa     2  72
gb200  fp8 1024 8192 mtp   1  4  8 tp      2  4,8
gb200  fp8 1024 8192 none  1  2 16 dpa   256  8192
gb200  fp8 1024 8192 none  1  1 32 dpa    64  2048
gb200  fp8 1024 8192 none  1  1 32 dpa    16  564
gb200  fp8 1024 8192 none  1  4  8 tp      8  36
gb200  fp8 1024 8192 none  1  4  8 tp      1  4
gb300  fp4 1024 1024 mtp   1  1  4 dpa   768  3226
gb300  fp4 1024 1024 mtp   1  1 32 dpa     8  333
gb300  fp4 1024 1024 mtp   1  4  8 tp      1  5
gb300  fp4 1024 1024 mtp   1  4  8 tp      8  8,12,24,48
gb300  fp4 1024 1024 mtp   3  1 16 dpa   128  2253
gb300  fp4 1024 1024 mtp   3  1 32 dpa    32  1229
gb300  fp4 1024 1024 none  1  4  8 tp      1  5
gb300  fp4 1024 1024 none  1  4  8 tp     32  12,48,96,192
gb300  fp4 1024 1024 none  2  1  8 dpa  1024  8192
gb300  fp4 1024 1024 none  2  1 32 dpa    32  1229
gb300  fp4 1024 1024 none  3  1 16 dpa   256  4301
gb300  fp4 1024 1024 none  3  1 32 dpa    64  2253
gb300  fp4 1024 8192 mtp   1  7  8 tp      1  7
gb300  fp4 1024 8192 mtp   1  7  8 tp      8  63
gb300  fp4 1024 8192 mtp   1  1 32 dpa    16  563
gb300  fp4 1024 8192 mtp   1  1 32 dpa    64  2088
gb300  fp4 1024 8192 mtp   1  2 16 dpa   256  8192
gb300  fp4 1024 8192 mtp   1  4  8 dpa   512  16384
gb300  fp4 1024 8192 none  1  7  8 tp      1  7
gb300  fp4 1024 8192 none  1 15  4 tp      4  60
gb300  fp4 1024 8192 none  1  7  8 tp     32  245
gb300  fp4 1024 8192 none  1  1 32 dpa    32  1024
gb300  fp4 1024 8192 none  1  1 32 dpa   128  4096
gb300  fp4 1024 8192 none  1  1 32 dpa   256  8192
gb300  fp8 1024 1024 mtp   1  4  8 tp      1  8
gb300  fp8 1024 1024 mtp   1  4  8 tp      4  24
gb300  fp8 1024 1024 mtp   1  1 32 dpa     4  180
gb300  fp8 1024 1024 mtp   2  1 32 dpa    16  564
gb300  fp8 1024 1024 mtp   1  1 16 dpa    32  666
gb300  fp8 1024 1024 mtp   2  1 16 dpa   128  2253
gb300  fp8 1024 1024 mtp   3  2  8 dpa   512  8192
gb300  fp8 1024 1024 none  1  4  8 tp      1  4
gb300  fp8 1024 1024 none  1  4  8 tp      4  24
gb300  fp8 1024 1024 none  1  4  8 tp     16  84
gb300  fp8 1024 1024 none  2  1 32 dpa    32  1229
gb300  fp8 1024 1024 none  2  1 16 dpa   128  2253
gb300  fp8 1024 1024 none  3  2  8 dpa   512  8602
gb300  fp8 1024 1024 none  3  2  8 dpa   768  12288
gb300  fp8 1024 8192 mtp   1  4  8 tp      1  4
gb300  fp8 1024 8192 mtp   1  4  8 tp      4  16
gb300  fp8 1024 8192 mtp   1  1 32 dpa     4  141
gb300  fp8 1024 8192 mtp   1  1 32 dpa    16  544
gb300  fp8 1024 8192 mtp   1  2 16 dpa    64  2048
gb300  fp8 1024 8192 mtp   1  4  8 dpa   256  8192
gb300  fp8 1024 8192 none  1  4  8 tp      1  4
gb300  fp8 1024 8192 none  1  4  8 tp      8  36
gb300  fp8 1024 8192 none  1  1 32 dpa     8  282
gb300  fp8 1024 8192 none  1  1 32 dpa    32  1024
gb300  fp8 1024 8192 none  1  2 16 dpa   128  4096
gb300  fp8 1024 8192 none  1  2 16 dpa   256  8192
b200   fp4 8192 1024 mtp   1  1  8 dpa     8  90
b200   fp4 8192 1024 mtp   1  3  8 tp     16  66
b200   fp4 8192 1024 mtp   1  5  8 tp      1  6
b200   fp4 8192 1024 mtp   1  5  8 tp      8  10,15,30,60
b200   fp4 8192 1024 mtp   3  1  8 dpa    64  548
b200   fp4 8192 1024 mtp   5  1  8 dpa   192  1096,1691
b200   fp4 8192 1024 mtp   5  2  8 dpa    32  658
b200   fp4 8192 1024 none  1  5  8 tp      1  6
b200   fp4 8192 1024 none  1  5  8 tp      8  10,15,25,50,100
b200   fp4 8192 1024 none  2  5  8 tp     64  370
b200   fp4 8192 1024 none  4  1  8 dpa   192  1606
b200   fp4 8192 1024 none  4  3  8 dpa    32  837
b200   fp4 8192 1024 none  7  2  8 dpa   128  2222
b200   fp8 8192 1024 mtp   1  6  8 tp      1  8
b200   fp8 8192 1024 mtp   1  2  8 tp      4  8
b200   fp8 8192 1024 mtp   1  6  8 tp      8  48
b200   fp8 8192 1024 mtp   1  4  8 tp     16  64
b200   fp8 8192 1024 mtp   2  3  8 dpa     8  224
b200   fp8 8192 1024 mtp   2  1  8 dpa    32  288
b200   fp8 8192 1024 mtp   4  1  8 dpa   128  1088
b200   fp8 8192 1024 none  1  1  8 tp      1  1
b200   fp8 8192 1024 none  1  4  8 tp      8  32
b200   fp8 8192 1024 none  1  4  8 tp     32  128
b200   fp8 8192 1024 none  1  6  8 tp     16  96
b200   fp8 8192 1024 none  1  1  8 dpa   128  128
b200   fp8 8192 1024 none  1  2  8 dpa    64  128
b200   fp8 8192 1024 none  1  1  8 dpa   256  256
b200   fp8 8192 1024 none  2  1  8 dpa   640  640
b300   fp4 8192 1024 mtp  10  1  8 dpa   256  2198
b300   fp4 8192 1024 mtp   1  4  4 tp      8  52
b300   fp4 8192 1024 mtp   1  4  8 tp      1  8
b300   fp4 8192 1024 mtp   1  4  8 tp      4  32
b300   fp4 8192 1024 mtp   3  1  8 dpa    16  181
b300   fp4 8192 1024 mtp   9  1  8 dpa   128  1197
b300   fp4 8192 1024 none  1  3  4 tp     32  105
b300   fp4 8192 1024 none  1  3  8 tp     16  63
b300   fp4 8192 1024 none  1  3  8 tp      1  4
b300   fp4 8192 1024 none  1  4  4 tp      2  12
b300   fp4 8192 1024 none  5  2  8 dpa    32  589
b300   fp4 8192 1024 none  6  1  8 dpa   128  1093
b300   fp4 8192 1024 none  8  1  8 dpa   256  2048
b300   fp8 8192 1024 mtp   1  2  8 tp     16  40
b300   fp8 8192 1024 mtp   1  4  8 tp      1  5,8
b300   fp8 8192 1024 mtp   1  4  8 tp      4  20
b300   fp8 8192 1024 mtp   1  1  8 dpa     8  72
b300   fp8 8192 1024 mtp   2  1  8 dpa    16  144
b300   fp8 8192 1024 mtp   4  1  8 dpa    64  512
b300   fp8 8192 1024 none  1  4  8 tp     16  64
b300   fp8 8192 1024 none  1  8  8 tp      1  10,16
b300   fp8 8192 1024 none  2  1  8 dpa    32  256
b300   fp8 8192 1024 none  3  1  8 dpa    64  512
b300   fp8 8192 1024 none  3  5  8 tp     64  256
b300   fp8 8192 1024 none  5  1  8 dpa   128  1075
b300   fp8 8192 1024 none  7  1  8 dpa   384  3072
h200   fp8 8192 1024 mtp   1  7  8 tp      1  1
h200   fp8 8192 1024 mtp   1  7  8 tp     32  4
h200   fp8 8192 1024 mtp   1  6  8 tp     32  8
h200   fp8 8192 1024 mtp   1  3  8 tp     32  16
h200   fp8 8192 1024 mtp   3  5  8 tp     32  32
h200   fp8 8192 1024 mtp   1  1  8 dpa    32  64
h200   fp8 8192 1024 mtp   2  1  8 dpa    32  128
h200   fp8 8192 1024 mtp   3  1  8 dpa    32  256
h200   fp8 8192 1024 mtp   3  1  8 dpa    64  512
h200   fp8 8192 1024 none  1  7  8 tp      1  1
h200   fp8 8192 1024 none  1  7  8 tp     32  4
h200   fp8 8192 1024 none  1  6  8 tp     16  8
h200   fp8 8192 1024 none  1  3  8 tp     32  16
h200   fp8 8192 1024 none  2  5  8 tp    128  32
h200   fp8 8192 1024 none  2  3  8 dpa   128  64
h200   fp8 8192 1024 none  1  1  8 dpa   256  128
h200   fp8 8192 1024 none  5  3  8 dpa   256  256
h200   fp8 8192 1024 none  3  1  8 dpa   512  512
h100   fp8 8192 1024 mtp   1  3 16 tp      1  6
h100   fp8 8192 1024 mtp   1  3 16 tp      2  9
h100   fp8 8192 1024 mtp   1  3 16 tp      8  30
h100   fp8 8192 1024 mtp   1  1 16 dpa     4  77
h100   fp8 8192 1024 mtp   2  1 16 dpa     8  154
h100   fp8 8192 1024 none  1  3 16 tp      1  6
h100   fp8 8192 1024 none  1  3 16 tp      2  9
h100   fp8 8192 1024 none  1  3 16 tp      8  30
h100   fp8 8192 1024 none  1  2 16 tp     64  154
h100   fp8 8192 1024 none  2  1 16 dpa    16  308
gb200  fp4 8192 1024 mtp   1  4  8 tp      8  4,8,12,24,48
gb200  fp4 8192 1024 mtp   3  1 32 dpa     4  180
gb200  fp4 8192 1024 mtp   7  1 16 dpa    64  1229
gb200  fp4 8192 1024 mtp   8  1 32 dpa    16  666
gb200  fp4 8192 1024 mtp  11  1 16 dpa   256  4301
gb200  fp4 8192 1024 none  1  4  8 dpa    16  12,44,76
gb200  fp4 8192 1024 none  1  4  8 dpa     1  5
gb200  fp4 8192 1024 none  2  1 32 dpa     8  333
gb200  fp4 8192 1024 none  7  1 32 dpa    32  1229
gb200  fp4 8192 1024 none  8  1 16 dpa   128  2253
gb200  fp4 8192 1024 none 10  1 16 dpa   256  4096
gb200  fp8 8192 1024 mtp   3  1  8 dpa    64  666
gb200  fp8 8192 1024 mtp   5  1 16 dpa    32  666
gb200  fp8 8192 1024 mtp   3  1 16 dpa    16  333
gb200  fp8 8192 1024 mtp   4  1 32 dpa     8  333
gb200  fp8 8192 1024 mtp   2  1 32 dpa     2  90
gb200  fp8 8192 1024 mtp   1  3  8 tp      4  15
gb200  fp8 8192 1024 mtp   1  3  8 tp      2  6
gb200  fp8 8192 1024 none  5  1 16 dpa    64  1229
gb200  fp8 8192 1024 none  4  1 32 dpa    16  666
gb200  fp8 8192 1024 none  3  1 16 dpa    32  615
gb200  fp8 8192 1024 none  2  1 32 dpa     8  333
gb200  fp8 8192 1024 none  1  3  8 tp     16  63
gb200  fp8 8192 1024 none  1  3  8 tp      4  18
gb200  fp8 8192 1024 none  1  3  8 tp      1  6
gb300  fp4 8192 1024 mtp   1  3  8 tp      8  33
gb300  fp4 8192 1024 mtp   1  4  8 tp      1  5
gb300  fp4 8192 1024 mtp   1  4  8 tp      4  12,24
gb300  fp4 8192 1024 mtp   4  1 32 dpa     4  180
gb300  fp4 8192 1024 mtp   8  1 32 dpa     8  308
gb300  fp4 8192 1024 mtp  10  1  8 dpa   256  2253
gb300  fp4 8192 1024 mtp  10  1 16 dpa    32  666
gb300  fp4 8192 1024 mtp  13  1 16 dpa    64  1127
gb300  fp4 8192 1024 none  1  3  8 tp     16  72
gb300  fp4 8192 1024 none  1  4  8 tp      1  5
gb300  fp4 8192 1024 none  1  4  8 tp      2  12
gb300  fp4 8192 1024 none  1  5  4 tp      4  5,15,30
gb300  fp4 8192 1024 none  7  1 32 dpa    16  666
gb300  fp4 8192 1024 none  9  1 16 dpa    64  1229
gb300  fp4 8192 1024 none 11  3  4 dpa   256  3228
gb300  fp4 8192 1024 none 14  1 16 dpa   128  2253
gb300  fp8 8192 1024 mtp   1  4  8 tp      1  8
gb300  fp8 8192 1024 mtp   1  4  8 tp      4  24
gb300  fp8 8192 1024 mtp   6  1 32 dpa     8  333
gb300  fp8 8192 1024 mtp   8  1 16 dpa    32  666
gb300  fp8 8192 1024 mtp  10  1 16 dpa    64  1229
gb300  fp8 8192 1024 mtp   7  1  8 dpa   128  1229
gb300  fp8 8192 1024 none  1  4  8 tp      1  4
gb300  fp8 8192 1024 none  1  4  8 tp      4  24
gb300  fp8 8192 1024 none  1  4  8 tp      8  36
gb300  fp8 8192 1024 none  6  1 32 dpa    16  512
gb300  fp8 8192 1024 none  4  1 16 dpa    32  666
gb300  fp8 8192 1024 none  7  1 16 dpa    64  1229
gb300  fp8 8192 1024 none  7  1  8 dpa   256  2151
"""

SOURCE = ("SemiAnalysisAI/InferenceX .github/configs/nvidia-master.yaml @ 0004cf5 "
          "(CONFIG_FILE recipe batch<B>; the recipe file's own decode block where it sets "
          "another)")


def _parse(text: str) -> dict[tuple, list[tuple[frozenset[int], int]]]:
    out: dict[tuple, list[tuple[frozenset[int], int]]] = {}
    for line in text.strip().splitlines():
        gpu, prec, isl, osl, spec, p, d, tp, attn, batch, concs = line.split()
        key = (gpu, prec, int(isl), int(osl), spec, int(p), int(d), int(tp), attn == "dpa")
        out.setdefault(key, []).append(
            (frozenset(int(c) for c in concs.split(",")), int(batch)))
    return out


_TABLE = _parse(RECIPES)


def decode_batch(gpu: str | None, precision: str | None, isl: int, osl: int, spec: str | None,
                 conc: int | None, prefill_workers: int | None, decode_workers: int | None,
                 decode_tp: int | None, decode_dpa: bool) -> int | None:
    """The decode workers' ``max_batch_size`` (per attention-DP rank) of the recipe that ran
    this Dynamo TensorRT-LLM row, or None where no entry matches its pools and clients."""
    return _recipe_limit(_TABLE, gpu, precision, isl, osl, spec, conc, prefill_workers,
                         decode_workers, decode_tp, decode_dpa)


def _recipe_limit(table: dict, gpu: str | None, precision: str | None, isl: int, osl: int,
                  spec: str | None, conc: int | None, prefill_workers: int | None,
                  decode_workers: int | None, decode_tp: int | None,
                  decode_dpa: bool) -> int | None:
    """The limit of the one entry of ``table`` (``_parse``) whose pools and clients the row
    matches exactly, or None."""
    if not (gpu and precision and conc and prefill_workers and decode_workers and decode_tp):
        return None
    key = (gpu, precision.lower(), int(isl), int(osl), "mtp" if spec == "mtp" else "none",
           int(prefill_workers), int(decode_workers), int(decode_tp), bool(decode_dpa))
    found = {limit for concs, limit in table.get(key, ()) if int(conc) in concs}
    return found.pop() if len(found) == 1 else None


#: Dynamo SGLang speculative decode workers' ``max-running-requests`` (whole worker).
SGLANG_SPECULATIVE_RUNNING = 512
SGLANG_SOURCE = ("ishandhanani/srt-slurm recipes/b200-fp4/1k1k-mtp.yaml, b200-fp8/1k1k-mtp.yaml "
                 "@ 893b9b9, b200-fp8/1k1k/mtp/max-tpt-dep8-1p2d.yaml @ 5bd0b3f, "
                 "h100/1k1k/mtp/h100-fp8-2p4d-max-dep-mtp.yaml @ 6a30b5d")


#: Dynamo SGLang decode workers' ``max-running-requests`` (whole worker) where the recipe a
#: run of InferenceX's config (nvidia-master.yaml @ 0004cf5) names sets one that can bind:
#: gpu, precision, ISL, OSL, speculative method, prefill workers, decode workers, decode TP,
#: decode attention, limit, clients (the TensorRT-LLM table's columns). Recipes:
#: qiching/srt-slurm @ 5063eb4 ``recipes/h200/{1k1k,8k1k}/*``, ``recipes/h100/*/mtp/*`` and
#: ``recipes/b200-fp{4,8}/*/{stp,mtp}/*`` (the ones read; the GB200/GB300 recipes set limits
#: no run's clients reach: 128 on four-plus TP workers, 8,192-67,584 on the wide-EP ones).
SGLANG_RECIPES = """
h200   fp8 1024 1024 none  1  9  8 tp    256  1,4,8,16,32,64,128,256
h200   fp8 1024 1024 none  1  6  8 tp    512  512,1024,2048
h200   fp8 1024 1024 none  1  6  8 dpa   512  128,256,512,1024,2048
h200   fp8 1024 1024 mtp   1  9  8 tp     64  1,4,8,16,32,64,128,256
h200   fp8 1024 1024 mtp   1  6  8 tp    128  512,1024,2048
h200   fp8 1024 1024 mtp   1  6  8 dpa   128  128,256,512,1024,2048
h200   fp8 8192 1024 none  1  7  8 tp      8  1,4,8
h200   fp8 8192 1024 none  1  6  8 tp     16  4,8,16
h200   fp8 8192 1024 none  1  3  8 tp     32  8,16,32
h200   fp8 8192 1024 none  2  3  8 tp    128  32,64,128
h200   fp8 8192 1024 none  1  1  8 dpa   256  64,128,256
h200   fp8 8192 1024 mtp   1  7  8 tp      2  1,4,8
h200   fp8 8192 1024 mtp   1  6  8 tp     16  2,4,8,16,32
h200   fp8 8192 1024 mtp   1  3  8 tp     32  4,8,16,32,64
h200   fp8 8192 1024 mtp   2  3  8 tp     16  32,64,128
h200   fp8 8192 1024 mtp   1  1  8 dpa   192  32,64,128,256,512
h100   fp8 1024 1024 mtp   1  2 16 tp    128  1,2,4,8,16,32,64,128
h100   fp8 1024 1024 mtp   1  1 16 dpa    64  1,2,4,8,16,32,64
h100   fp8 1024 8192 mtp   1  2 16 tp     64  1,2,4,8,16,32,64
h100   fp8 1024 8192 mtp   1  1 16 dpa    64  1,2,4,8,16,32,64
h100   fp8 8192 1024 mtp   1  1 16 tp    128  1,2,4,8,16,32,64,128
h100   fp8 8192 1024 mtp   1  1 16 dpa    64  1,2,4,8,16,32,64
b200   fp8 1024 1024 none  1  1  8 tp    512  4
b200   fp8 1024 1024 none  1  3  8 tp    512  16,32,64,128,256
b200   fp8 1024 1024 none  1  5  8 dpa  1024  1024
b200   fp8 8192 1024 none  1  1  8 tp    512  4,32,64,512
b200   fp8 8192 1024 none  1  4  8 tp    512  64,512
b200   fp8 8192 1024 none  1  1  8 dpa  1024  128,512,1024
b200   fp8 8192 1024 none  2  1  8 dpa  1024  256,512,1024
b200   fp8 1024 1024 mtp   1  3  8 tp    512  4,8,16,32,128
b200   fp8 1024 1024 mtp   1  5  8 dpa   512  512,4096
b200   fp4 1024 1024 none  1  5  8 tp    512  16,128
b200   fp4 1024 1024 none  1  1  8 dpa  1024  512
b200   fp4 8192 1024 none  7  2  8 dpa  2048  1024,2048
b200   fp4 1024 1024 mtp   1  5  8 tp    512  16,512
"""

_SGLANG_TABLE = _parse(SGLANG_RECIPES)


def dynamo_sglang_running(gpu: str | None, precision: str | None, isl: int, osl: int,
                          spec: str | None, conc: int | None, prefill_workers: int | None,
                          decode_workers: int | None, decode_tp: int | None,
                          decode_dpa: int | None) -> int | None:
    """The running limit per attention-DP rank of the Dynamo SGLang decode worker whose recipe
    ran this row (its pools and clients matched exactly in ``SGLANG_RECIPES``), else the
    speculative recipes' 512 (``sglang_decode_running``), else None."""
    limit = _recipe_limit(_SGLANG_TABLE, gpu, precision, isl, osl, spec, conc,
                          prefill_workers, decode_workers, decode_tp, (decode_dpa or 1) > 1)
    if limit is not None:
        return sglang_running_per_rank(limit, decode_dpa)
    return sglang_decode_running(spec, decode_dpa)


def sglang_decode_running(spec: str | None, decode_dpa: int | None) -> int | None:
    """The running limit per attention-DP rank of a Dynamo SGLang decode worker as its recipe
    set it: the speculative recipes' 512 divided among the ranks, as SGLang divides a set
    value; None for plain decoding (SGLang's own default stands)."""
    if spec != "mtp":
        return None
    return sglang_running_per_rank(SGLANG_SPECULATIVE_RUNNING, decode_dpa)


#: mori-sglang decode workers' ``max_running_requests`` (whole worker) by the mode its launch
#: config picks: attention DP, expert parallel without it, neither.
MORI_RUNNING = {"dp": 4096, "ep_only": 256, "no_dp": 128}
MORI_SOURCE = ("SemiAnalysisAI/InferenceX benchmarks/multi_node/amd_utils/models.yaml "
               "@ 02d1804, DeepSeek-R1 decode")


def mori_decode_running(decode_dpa: int | None, decode_ep: int | None) -> int:
    """The running limit per attention-DP rank of a mori-sglang decode worker as InferenceX's
    AMD launch config sets it for DeepSeek-R1: 4,096 a worker with attention DP (divided among
    the ranks, as SGLang divides a set value), 256 with expert parallelism alone, 128 with
    neither. An earlier version of the file (@ e67ca48) set 8,192 and 256 (no EP-only mode), so
    no row's clients bind at either; what the config changes is that a speculative worker is
    not held to SGLang's default of 48."""
    if (decode_dpa or 1) > 1:
        return sglang_running_per_rank(MORI_RUNNING["dp"], decode_dpa)
    return MORI_RUNNING["ep_only"] if (decode_ep or 1) > 1 else MORI_RUNNING["no_dp"]


#: InferenceX's single-node SGLang DeepSeek-R1 scripts' ``--max-running-requests``, by GPU,
#: precision and speculative method: an int, "conc" (the row's clients), a (1k/1k, other
#: shapes) pair, a {tp: value} map, or None (not passed: SGLang's default stands, 48 under
#: speculative decoding).
COLOCATED_SGLANG_RUNNING = {
    ("b200", "fp8", "mtp"): 512,         # dsr1_fp8_b200_mtp.sh @ 8eec0d4
    ("b200", "fp4", "mtp"): 512,         # dsr1_fp4_b200_mtp.sh @ f89cdfe (256 @ 25cbe71)
    ("b300", "fp8", "mtp"): 512,         # dsr1_fp8_b300_mtp.sh @ 8eec0d4 (the B200 recipe as-is)
    ("h200", "fp8", "mtp"): (512, 256),  # dsr1_fp8_h200_mtp.sh @ bdf931e: 512 at 1k/1k, else 256
    ("mi355x", "fp8", "mtp"): "conc",    # dsr1_fp8_mi355x_mtp.sh @ 25cbe71: the row's clients
    ("mi355x", "fp4", "mtp"): None,      # dsr1_fp4_mi355x_mtp.sh @ f89cdfe passes none
    ("h200", "fp8", "none"): (512, 256),  # dsr1_fp8_h200.sh @ 8eec0d4, as its MTP script
    # dsr1_fp8_b200.sh @ 432945d: 128 at TP8; TP4 runs only at 8k/1k, with 32
    ("b200", "fp8", "none"): {8: 128, 4: 32},
    ("b300", "fp8", "none"): {8: 128, 4: 32},   # dsr1_fp8_b300.sh @ 8eec0d4 (as B200's)
    ("b200", "fp4", "none"): 256,        # dsr1_fp4_b200.sh @ 8eec0d4 and 25cbe71
    ("b300", "fp4", "none"): 256,        # dsr1_fp4_b300.sh @ 8eec0d4 (as B200's)
}
COLOCATED_SOURCE = ("SemiAnalysisAI/InferenceX benchmarks/single_node/fixed_seq_len/"
                    "dsr1_<precision>_<gpu>[_mtp].sh")


def colocated_sglang_running(gpu: str | None, precision: str | None, isl: int, osl: int,
                             conc: int | None, spec: str | None = "mtp",
                             tp: int | None = None) -> int | None:
    """The ``--max-running-requests`` an InferenceX single-node SGLang script gave this row's
    server (one instance, no attention DP), or None where the script passes none or was not
    read (MI300X, MI325X and MI355X plain decoding pass none): SGLang's default then stands."""
    method = "mtp" if spec == "mtp" else "none"
    limit = COLOCATED_SGLANG_RUNNING.get((gpu or "", (precision or "").lower(), method))
    if limit == "conc":
        return int(conc) if conc else None
    if isinstance(limit, tuple):
        return limit[0] if (int(isl), int(osl)) == (1024, 1024) else limit[1]
    if isinstance(limit, dict):
        return limit.get(int(tp or 0))
    return limit


#: The single-node SGLang scripts' step budget (``--chunked-prefill-size``, with
#: ``--max-prefill-tokens`` the same) where it depends on the row: (GPU, precision) ->
#: (ISL, OSL, more clients than this, the budget). Both MI355X FP4 scripts
#: (``dsr1_fp4_mi355x.sh`` @ 8eec0d4, ``dsr1_fp4_mi355x_mtp.sh`` @ f89cdfe) pass 196,608 but
#: 32,768 at 8k/1k past 32 clients; the other scripts read pass one budget at every shape,
#: which their scenario templates carry (``scenarios/inferencemax/``).
SGLANG_SHAPE_BUDGET = {("mi355x", "fp4"): (8192, 1024, 32, 32768)}
SGLANG_BUDGET_SOURCE = ("SemiAnalysisAI/InferenceX benchmarks/single_node/fixed_seq_len/"
                        "dsr1_fp4_mi355x{,_mtp}.sh")


def colocated_sglang_budget(gpu: str | None, precision: str | None, isl: int, osl: int,
                            conc: int | None) -> int | None:
    """The step budget an InferenceX single-node SGLang script set for this row where it
    differs from the script's budget at other shapes, else None (the template's stands)."""
    rule = SGLANG_SHAPE_BUDGET.get((gpu or "", (precision or "").lower()))
    if rule is None or not conc:
        return None
    at_isl, at_osl, past, budget = rule
    return budget if (int(isl), int(osl)) == (at_isl, at_osl) and conc > past else None


def running_limit(engine: str | None, disaggregated: bool, *, gpu: str | None,
                  precision: str | None, isl: int, osl: int, spec: str | None,
                  conc: int | None, tp: int | None, ep: int | None, dpa: int | None,
                  prefill_workers: int | None, decode_workers: int | None
                  ) -> tuple[int, str] | None:
    """The running limit (per attention-DP rank; the decode workers' where the row is
    disaggregated) an InferenceMAX row's launch recipe set, with the note that says where it
    came from; None where no recipe read here sets one."""
    if disaggregated and engine == "dynamo-trt":
        running = decode_batch(gpu, precision, isl, osl, spec, conc, prefill_workers,
                               decode_workers, tp, (dpa or 1) > 1)
        note = f"decode max_batch_size {{}} per attention-DP rank, from the launch recipe ({SOURCE})"
    elif disaggregated and engine == "dynamo-sglang":
        running = dynamo_sglang_running(gpu, precision, isl, osl, spec, conc, prefill_workers,
                                        decode_workers, tp, dpa)
        note = ("decode max-running-requests {} per attention-DP rank, from the launch "
                "recipe (qiching/srt-slurm @ 5063eb4, launch_recipes.SGLANG_RECIPES; "
                f"else the speculative recipes' {SGLANG_SPECULATIVE_RUNNING} a worker, "
                f"{SGLANG_SOURCE})")
    elif disaggregated and engine == "mori-sglang" and decode_workers:
        running = mori_decode_running(dpa, ep)
        note = ("decode max_running_requests {} per attention-DP rank, from the launch "
                f"config ({MORI_SOURCE})")
    elif not disaggregated and engine == "sglang" and (dpa or 1) == 1:
        running = colocated_sglang_running(gpu, precision, isl, osl, conc, spec, tp)
        note = f"max-running-requests {{}}, from the launch script ({COLOCATED_SOURCE})"
    else:
        return None
    return (running, note.format(running)) if running else None


# The single-node TensorRT-LLM servers' step budget, running limit and batch waiting, from
# InferenceX's ``benchmarks/single_node/fixed_seq_len/dsr1_{fp8,fp4}_b200_trt{,_mtp}.sh`` and
# ``dsr1_fp8_h200_trt{,_mtp}.sh`` @ 8eec0d4 (read with the search tool). Without a draft model
# every script passes ``--max_num_tokens`` = ISL + clients + 64 rounded up to 64, at least
# 8,192, and no ``--max_batch_size``; the B200 FP8 one also sets batch waiting (40 steps, 0.8
# of the budget) at 1k/1k from 64 clients. With MTP (3 draft layers, 1 under attention DP)
# they pass ``--max_batch_size`` = the clients, or under attention DP a rank's share (B200
# FP8: clients / 8 from 8 clients, FP4: / 4 from 4, H200: / TP, at least 1), and
# ``--max_num_tokens`` = (drafts + 1) x that + ISL + 64, rounded up to 64, with no floor:
# about one prompt a step.
TRT_SCRIPT_SOURCE = ("InferenceX benchmarks/single_node/fixed_seq_len/dsr1_*_trt*.sh @ "
                     "8eec0d4")
TRT_SCRIPT_GPUS = ("b200", "h200")
TRT_TOKENS_FLOOR = 8192
TRT_BATCH_WAIT = (40, 0.8)        # dsr1_fp8_b200_trt.sh, 1k/1k from 64 clients
TRT_BATCH_WAIT_FROM = 64
# under attention DP, a rank's share: (divisor, below this many clients the whole count)
TRT_MTP_RANK_SHARE = {("b200", "fp8"): (8, 8), ("b200", "fp4"): (4, 4)}


@attrs.frozen
class TrtFlags:
    """What an InferenceX TensorRT-LLM launch script passed a single-node server."""

    max_num_tokens: int
    max_batch_size: int | None = None          # per attention-DP rank
    batch_wait: tuple[int, float] | None = None  # (timeout steps, ratio of max_num_tokens)

    def note(self) -> str:
        parts = [f"max_num_tokens {self.max_num_tokens}"]
        if self.max_batch_size:
            parts.append(f"max_batch_size {self.max_batch_size}")
        if self.batch_wait:
            parts.append("batch waiting {} steps / {} of the budget".format(*self.batch_wait))
        return ", ".join(parts) + f", from the launch script ({TRT_SCRIPT_SOURCE})"


def _to_64(tokens: int) -> int:
    return (tokens + 63) // 64 * 64


def colocated_trt_flags(gpu: str | None, precision: str | None, isl: int, osl: int,
                        conc: int | None, spec: str | None, tp: int | None,
                        dpa: int | None) -> TrtFlags | None:
    """The flags the InferenceX script gave a single-node TensorRT-LLM row's server; None
    where no script read here launched it."""
    precision = (precision or "").lower()
    if gpu not in TRT_SCRIPT_GPUS or not conc or precision not in ("fp8", "fp4") \
            or (gpu == "h200" and precision != "fp8"):
        return None
    if spec in (None, "none"):
        wait = TRT_BATCH_WAIT if (gpu, precision, isl, osl) == ("b200", "fp8", 1024, 1024) \
            and conc >= TRT_BATCH_WAIT_FROM else None
        return TrtFlags(max(TRT_TOKENS_FLOOR, _to_64(conc + isl + 64)), None, wait)
    ranks = (dpa or 1) > 1
    drafts = 1 if ranks else 3
    batch = conc
    if ranks:
        divisor, below = TRT_MTP_RANK_SHARE.get((gpu, precision), (tp or 1, 0))
        batch = conc if conc < below else max(1, conc // divisor)
    return TrtFlags(_to_64((drafts + 1) * batch + isl + 64), batch)
