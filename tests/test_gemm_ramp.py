"""The GEMM's tile ramp (``cost.oracle.GEMM_RAMP_ROWS``): its shape, and its fit held out by
model on Vidur's H100 operator profiles (``inferasim validate kernels``)."""

import json

import pytest
from click.testing import CliRunner

from inferasim.cli.main import cli
from inferasim.config.loader import catalog_gpu
from inferasim.cost.oracle import GEMM_RAMP_ROWS, gemm_roofline, tile_ramp
from tests.conftest import shared_data


def test_the_ramp_stretches_short_gemms_and_fades_with_rows():
    assert tile_ramp(GEMM_RAMP_ROWS) == pytest.approx(2.0)
    assert tile_ramp(1e6) == pytest.approx(1.0, abs=1e-3)
    assert tile_ramp(0) == tile_ramp(1)   # no division by nothing
    rows = [16, 64, 256, 1024, 4096]
    assert all(tile_ramp(a) > tile_ramp(b) for a, b in zip(rows, rows[1:], strict=False))


def test_the_roofline_is_soft_only_on_its_compute_side():
    h100 = catalog_gpu("h100")
    k = n = 8192
    weight = 2.0 * k * n

    def seconds(rows, ramp=True):
        return gemm_roofline(h100, 2.0 * rows * k * n, weight, rows if ramp else float("inf"),
                             "bf16")

    # far below the knee the weight read rules, ramp or not
    assert seconds(8) == pytest.approx(seconds(8, ramp=False))
    # at the knee (about 260 rows at the catalog's H100 efficiencies) the ramp costs most
    assert seconds(256) > 1.4 * seconds(256, ramp=False)
    # far past it the stretch is the ramp's share of the rows
    assert seconds(8192) == pytest.approx(seconds(8192, ramp=False) * (1 + 128 / 8192))


@pytest.fixture(scope="module")
def kernels():
    folder = shared_data("vidur-profiling")
    result = CliRunner().invoke(cli, ["validate", "kernels", str(folder), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_the_ramp_removes_the_roofline_bias_at_its_knee(kernels):
    h100 = kernels["parts"]["h100"]
    for rows in ("rows 129-256", "rows 257-512", "rows 513-1024"):
        hard, ramp = h100["hard_roofline"][rows], h100["with_ramp"][rows]
        # the hard roofline reads these GEMMs 15-22% fast (log error +0.14 to +0.23)
        assert hard["median_signed"] > 0.12, rows
        assert abs(ramp["median_signed"]) < 0.05, rows
        assert ramp["median_abs"] < hard["median_abs"], rows
    assert h100["with_ramp"]["all all"]["median_abs"] < h100["hard_roofline"]["all all"][
        "median_abs"]


def test_each_model_held_out_fits_the_shipped_ramp(kernels):
    held = kernels["ramp_held_out_by_model"]["h100"]
    assert len(held) == 6
    assert all(96 <= v <= 160 for v in held.values()), held


def test_a100_held_out_by_model_fits_its_catalog_ramp(kernels):
    # Llama-3-8B's GEMMs fit Llama-3-70B's ramp and the reverse: the catalog's 64 rows
    held = kernels["ramp_held_out_by_model"]["a100"]
    assert set(held.values()) == {catalog_gpu("a100").gemm_ramp_rows}, held
    a100 = kernels["parts"]["a100"]
    for rows in ("rows 65-128", "rows 129-256", "rows 257-512"):
        hard, ramp = a100["hard_roofline"][rows], a100["with_ramp"][rows]
        assert hard["median_signed"] > 0.14, rows    # the hard roofline 16-31% fast there
        assert ramp["median_abs"] < hard["median_abs"], rows


def test_a_folder_without_profiles_is_a_clear_error(tmp_path):
    result = CliRunner().invoke(cli, ["validate", "kernels", str(tmp_path)])
    assert result.exit_code == 2
    assert "compute/<part>" in result.output and str(tmp_path) in result.output
    assert "Traceback" not in result.output


def test_the_ramp_is_carried_by_the_parts_it_was_measured_on():
    assert catalog_gpu("h100").gemm_ramp_rows == GEMM_RAMP_ROWS
    assert catalog_gpu("h200").gemm_ramp_rows == GEMM_RAMP_ROWS   # the same Hopper GEMMs
    assert catalog_gpu("a100").gemm_ramp_rows == 64.0             # its own profiles' fit
    for part in ("b200", "mi355x", "mi300x"):
        assert catalog_gpu(part).gemm_ramp_rows == 0.0, part   # unmeasured: the hard roofline
    mi355x = catalog_gpu("mi355x")
    assert gemm_roofline(mi355x, 2.0 * 256 * 8192 * 8192, 1.0, 256, "bf16") == pytest.approx(
        2.0 * 256 * 8192 * 8192 / (mi355x.bf16_flops * mi355x.efficiency.gemm))
