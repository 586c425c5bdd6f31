"""Write the synthetic_*.csv files in this folder (run: python tests/data/ncu/make_synthetic.py).

They are NOT measurements. They imitate `ncu --csv --page raw --set full` output for the capture scenarios of
scripts/capture_ncu.py on an H200 - same layout (quoted cells, a units line, one row per launch, display-scaled units,
thousands separators, the unit spellings and metric names of older ncu releases) and values guessed for those
kernels - so the parser and the policy could be tested before real captures existed. The real captures (h200/,
ncu 2025.3.1) now drive the scenario tests; where they disagree with a guess here (naive_gemm, register_heavy), the
synthetic file describes a different, hypothetical kernel and is kept for the cases and metric names it exercises.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
ID_COLUMNS = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
              "Grid Size", "Device", "CC"]  # fmt: skip

OLD_DRAM_METRIC = "dram__throughput.avg.pct_of_peak_sustained_elapsed"  # the name older ncu releases use

# metric -> unit, in the order the columns appear
UNITS = {
    "device__attribute_multiprocessor_count": "",
    "dram__bytes_read.sum": "Mbyte",
    "dram__bytes_write.sum": "Mbyte",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": "%",
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed": "%",
    "gpu__time_duration.sum": "usecond",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": "",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum": "",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": "",
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum": "",
    "l1tex__t_sector_hit_rate.pct": "%",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": "sector",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum": "sector",
    "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum": "sector",
    "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum": "sector",
    "l1tex__throughput.avg.pct_of_peak_sustained_active": "%",
    "launch__block_size": "",
    "launch__grid_size": "",
    "launch__occupancy_limit_blocks": "block",
    "launch__occupancy_limit_registers": "block",
    "launch__occupancy_limit_shared_mem": "block",
    "launch__occupancy_limit_warps": "block",
    "launch__registers_per_thread": "register/thread",
    "launch__shared_mem_per_block_dynamic": "byte",
    "launch__shared_mem_per_block_static": "byte",
    "launch__waves_per_multiprocessor": "",
    "lts__t_sector_hit_rate.pct": "%",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed": "%",
    "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active": "%",
    "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active": "%",
    "sm__inst_issued.avg.pct_of_peak_sustained_active": "%",
    "sm__maximum_warps_per_active_cycle_pct": "%",
    "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active": "%",
    "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active": "%",
    "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active": "%",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active": "%",
    "sm__sass_data_bytes_mem_global_op_ld.sum": "Mbyte",
    "sm__sass_data_bytes_mem_global_op_st.sum": "Mbyte",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "%",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "%",
    "smsp__average_warp_latency_per_inst_issued.ratio": "",
    "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio": "",
    "smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio": "",
    "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio": "",
    "smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio": "",
    "smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio": "",
    "smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio": "",
    "smsp__sass_average_branch_targets_threads_uniform.pct": "%",
    "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum": "inst",
    "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": "inst",
    "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum": "inst",
    "smsp__thread_inst_executed_per_inst_executed.ratio": "",
}

# A kernel that is busy nowhere in particular; each scenario overrides what makes it what it is.
BASE = {
    "device__attribute_multiprocessor_count": 132,
    "dram__bytes_read.sum": 10.0,
    "dram__bytes_write.sum": 10.0,
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": 30.0,
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed": 25.0,
    "gpu__time_duration.sum": 100.0,
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": 0,
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum": 0,
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": 1_000_000,
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum": 1_000_000,
    "l1tex__t_sector_hit_rate.pct": 10.0,
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": 4_000_000,
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum": 4_000_000,
    "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum": 0,
    "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum": 0,
    "l1tex__throughput.avg.pct_of_peak_sustained_active": 30.0,
    "launch__block_size": 256,
    "launch__grid_size": 16384,
    "launch__occupancy_limit_blocks": 32,
    "launch__occupancy_limit_registers": 8,
    "launch__occupancy_limit_shared_mem": 32,
    "launch__occupancy_limit_warps": 8,
    "launch__registers_per_thread": 32,
    "launch__shared_mem_per_block_dynamic": 0,
    "launch__shared_mem_per_block_static": 0,
    "launch__waves_per_multiprocessor": 15.52,
    "lts__t_sector_hit_rate.pct": 50.0,
    "lts__throughput.avg.pct_of_peak_sustained_elapsed": 25.0,
    "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active": 10.0,
    "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active": 0.0,
    "sm__inst_issued.avg.pct_of_peak_sustained_active": 20.0,
    "sm__maximum_warps_per_active_cycle_pct": 100.0,
    "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active": 5.0,
    "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active": 5.0,
    "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active": 0.0,
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active": 0.0,
    "sm__sass_data_bytes_mem_global_op_ld.sum": 128.0,
    "sm__sass_data_bytes_mem_global_op_st.sum": 128.0,
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": 20.0,
    "sm__warps_active.avg.pct_of_peak_sustained_active": 80.0,
    "smsp__average_warp_latency_per_inst_issued.ratio": 40.0,
    "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio": 0.0,
    "smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio": 2.0,
    "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio": 25.0,
    "smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio": 0.1,
    "smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio": 0.3,
    "smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio": 0.2,
    "smsp__sass_average_branch_targets_threads_uniform.pct": 100.0,
    "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum": 0,
    "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 0,
    "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum": 0,
    "smsp__thread_inst_executed_per_inst_executed.ratio": 32.0,
}

SCENARIOS = {
    # y = 2x + 1 over 64 Mi floats: DRAM at 92 %; the old metric name dram__throughput is used (renamed metric).
    "streaming_elementwise": dict(
        kernel="scale_shift_kernel",
        block=(256, 1, 1),
        grid=(16384, 1, 1),
        launches=2,
        units={"gpu__time_duration.sum": "usecond"},
        rename={"gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed": OLD_DRAM_METRIC},
        metrics={
            "gpu__time_duration.sum": 116.2,
            "sm__throughput.avg.pct_of_peak_sustained_elapsed": 18.4,
            "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": 92.3,
            "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed": 92.3,
            "l1tex__throughput.avg.pct_of_peak_sustained_active": 29.5,
            "lts__throughput.avg.pct_of_peak_sustained_elapsed": 46.1,
            "l1tex__t_sector_hit_rate.pct": 0.0,
            "lts__t_sector_hit_rate.pct": 50.1,
            "dram__bytes_read.sum": 268.44,
            "dram__bytes_write.sum": 268.39,
            "sm__warps_active.avg.pct_of_peak_sustained_active": 84.7,
            "launch__registers_per_thread": 16,
            "launch__occupancy_limit_registers": 16,
            "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": 8_388_608,
            "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": 524_288,
            "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum": 8_388_608,
            "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum": 524_288,
            "sm__sass_data_bytes_mem_global_op_ld.sum": 268.44,
            "sm__sass_data_bytes_mem_global_op_st.sum": 268.44,
            "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 67_108_864,
            "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active": 7.9,
            "sm__inst_issued.avg.pct_of_peak_sustained_active": 11.8,
            "smsp__average_warp_latency_per_inst_issued.ratio": 61.0,
            "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio": 48.2,
        },
    ),
    # Naive transpose: loads walk down columns (12.5 % sector efficiency), stores are contiguous.
    "strided_transpose": dict(
        kernel="transpose_naive_kernel",
        block=(128, 1, 1),
        grid=(8192, 8, 1),
        launches=2,
        units={"gpu__time_duration.sum": "msecond", "dram__bytes_read.sum": "Gbyte", "dram__bytes_write.sum": "Mbyte"},
        metrics={
            "gpu__time_duration.sum": 1.92,
            "sm__throughput.avg.pct_of_peak_sustained_elapsed": 34.6,
            "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": 88.1,
            "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed": 55.2,
            "l1tex__throughput.avg.pct_of_peak_sustained_active": 88.1,
            "lts__throughput.avg.pct_of_peak_sustained_elapsed": 70.4,
            "l1tex__t_sector_hit_rate.pct": 1.2,
            "lts__t_sector_hit_rate.pct": 71.3,
            "dram__bytes_read.sum": 4.1,
            "dram__bytes_write.sum": 268.5,
            "launch__block_size": 128,
            "launch__grid_size": 65536,
            "launch__occupancy_limit_warps": 16,
            "launch__occupancy_limit_registers": 16,
            "launch__waves_per_multiprocessor": 15.52,
            "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": 67_108_864,
            "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": 2_097_152,
            "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum": 8_388_608,
            "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum": 524_288,
            "sm__sass_data_bytes_mem_global_op_ld.sum": 268.44,
            "sm__sass_data_bytes_mem_global_op_st.sum": 268.44,
            "smsp__average_warp_latency_per_inst_issued.ratio": 112.0,
            "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio": 71.5,
            "smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio": 30.2,
        },
    ),
    # Scalar-A x row-of-B GEMM: L1/L2 busy re-reading operands, DRAM idle, no tensor cores.
    "naive_gemm": dict(
        kernel="matmul_naive_kernel",
        block=(128, 1, 1),
        grid=(1024, 8, 1),
        launches=2,
        units={"gpu__time_duration.sum": "msecond", "sm__sass_data_bytes_mem_global_op_ld.sum": "Gbyte"},
        metrics={
            "gpu__time_duration.sum": 1.45,
            "sm__throughput.avg.pct_of_peak_sustained_elapsed": 48.2,
            "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": 82.4,
            "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed": 6.1,
            "l1tex__throughput.avg.pct_of_peak_sustained_active": 82.4,
            "lts__throughput.avg.pct_of_peak_sustained_elapsed": 63.8,
            "l1tex__t_sector_hit_rate.pct": 88.0,
            "lts__t_sector_hit_rate.pct": 99.1,
            "dram__bytes_read.sum": 9.2,
            "dram__bytes_write.sum": 4.2,
            "launch__block_size": 128,
            "launch__grid_size": 8192,
            "launch__registers_per_thread": 38,
            "launch__occupancy_limit_registers": 13,
            "launch__occupancy_limit_warps": 16,
            "launch__waves_per_multiprocessor": 4.77,
            "sm__maximum_warps_per_active_cycle_pct": 81.25,
            "sm__warps_active.avg.pct_of_peak_sustained_active": 76.3,
            "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": 167_772_160,
            "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": 67_108_864,
            "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum": 131_072,
            "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum": 32_768,
            "sm__sass_data_bytes_mem_global_op_ld.sum": 8.59,
            "sm__sass_data_bytes_mem_global_op_st.sum": 4.19,
            "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 1_073_741_824,
            "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active": 21.7,
            "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active": 17.9,
            "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active": 69.5,
            "sm__inst_issued.avg.pct_of_peak_sustained_active": 55.0,
            "smsp__average_warp_latency_per_inst_issued.ratio": 30.1,
            "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio": 9.0,
            "smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio": 12.2,
        },
    ),
    # 4096^3 FP32 GEMM with tl.dot(input_precision="ieee"): FMA pipes at 82 %, tensor pipes idle, 1 block per SM.
    "tiled_gemm_fp32": dict(
        kernel="matmul_fp32_kernel",
        block=(256, 1, 1),
        grid=(32, 32, 1),
        launches=2,
        units={"gpu__time_duration.sum": "msecond", "launch__shared_mem_per_block_dynamic": "Kbyte"},
        metrics={
            "gpu__time_duration.sum": 3.93,
            "sm__throughput.avg.pct_of_peak_sustained_elapsed": 78.3,
            "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": 45.0,
            "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed": 8.2,
            "l1tex__throughput.avg.pct_of_peak_sustained_active": 45.0,
            "lts__throughput.avg.pct_of_peak_sustained_elapsed": 22.4,
            "l1tex__t_sector_hit_rate.pct": 0.5,
            "lts__t_sector_hit_rate.pct": 93.0,
            "dram__bytes_read.sum": 310.2,
            "dram__bytes_write.sum": 67.1,
            "launch__block_size": 256,
            "launch__grid_size": 1024,
            "launch__registers_per_thread": 168,
            "launch__shared_mem_per_block_dynamic": 98.3,
            "launch__occupancy_limit_registers": 1,
            "launch__occupancy_limit_shared_mem": 2,
            "launch__occupancy_limit_warps": 8,
            "launch__waves_per_multiprocessor": 7.76,
            "sm__maximum_warps_per_active_cycle_pct": 12.5,
            "sm__warps_active.avg.pct_of_peak_sustained_active": 12.4,
            "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": 268_435_456,
            "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": 16_777_216,
            "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum": 2_097_152,
            "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum": 131_072,
            "sm__sass_data_bytes_mem_global_op_ld.sum": 8589.9,
            "sm__sass_data_bytes_mem_global_op_st.sum": 67.1,
            "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum": 1_073_741_824,
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": 21_474_836,
            "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 68_719_476_736,
            "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active": 82.1,
            "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active": 11.6,
            "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active": 18.0,
            "sm__inst_issued.avg.pct_of_peak_sustained_active": 70.2,
            "smsp__average_warp_latency_per_inst_issued.ratio": 2.9,
            "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio": 0.3,
            "smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio": 0.9,
        },
    ),
    # Row sums of 8192 x 8192 floats, one row per program: DRAM at 70 %, some headroom left.
    "row_reduction": dict(
        kernel="row_sum_kernel",
        block=(128, 1, 1),
        grid=(8192, 1, 1),
        launches=2,
        metrics={
            "gpu__time_duration.sum": 80.4,
            "sm__throughput.avg.pct_of_peak_sustained_elapsed": 22.0,
            "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": 71.6,
            "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed": 70.3,
            "l1tex__throughput.avg.pct_of_peak_sustained_active": 24.8,
            "lts__throughput.avg.pct_of_peak_sustained_elapsed": 37.9,
            "dram__bytes_read.sum": 268.5,
            "dram__bytes_write.sum": 0.03,
            "launch__block_size": 128,
            "launch__grid_size": 8192,
            "launch__occupancy_limit_warps": 16,
            "launch__occupancy_limit_registers": 16,
            "launch__registers_per_thread": 30,
            "launch__waves_per_multiprocessor": 3.88,
            "sm__warps_active.avg.pct_of_peak_sustained_active": 78.0,
            "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": 8_388_608,
            "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": 524_288,
            "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum": 8192,
            "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum": 8192,
            "sm__sass_data_bytes_mem_global_op_ld.sum": 268.44,
            "sm__sass_data_bytes_mem_global_op_st.sum": 0.13,
            "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum": 67_108_864,
            "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active": 6.0,
            "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio": 31.0,
        },
    ),
    # A 16384-wide row held in registers: 255 registers, spills, 2 blocks per SM, memory not saturated.
    "register_heavy": dict(
        kernel="wide_row_normalize_kernel",
        block=(128, 1, 1),
        grid=(4096, 1, 1),
        launches=2,
        metrics={
            "gpu__time_duration.sum": 212.7,
            "sm__throughput.avg.pct_of_peak_sustained_elapsed": 28.3,
            "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": 54.0,
            "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed": 52.1,
            "l1tex__throughput.avg.pct_of_peak_sustained_active": 40.2,
            "lts__throughput.avg.pct_of_peak_sustained_elapsed": 35.3,
            "dram__bytes_read.sum": 268.6,
            "dram__bytes_write.sum": 268.4,
            "launch__block_size": 128,
            "launch__grid_size": 4096,
            "launch__registers_per_thread": 255,
            "launch__occupancy_limit_registers": 2,
            "launch__occupancy_limit_warps": 16,
            "launch__waves_per_multiprocessor": 15.52,
            "launch__shared_mem_per_block_static": 16,
            "sm__maximum_warps_per_active_cycle_pct": 12.5,
            "sm__warps_active.avg.pct_of_peak_sustained_active": 11.8,
            "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": 8_388_608,
            "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": 524_288,
            "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum": 8_388_608,
            "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum": 524_288,
            "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum": 2_621_440,
            "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum": 2_621_440,
            "sm__sass_data_bytes_mem_global_op_ld.sum": 268.44,
            "sm__sass_data_bytes_mem_global_op_st.sum": 268.44,
            "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum": 134_217_728,
            "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 67_108_864,
            "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum": 67_108_864,
            "sm__inst_issued.avg.pct_of_peak_sustained_active": 18.0,
            "smsp__average_warp_latency_per_inst_issued.ratio": 52.0,
            "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio": 30.4,
            "smsp__thread_inst_executed_per_inst_executed.ratio": 31.9,
        },
    ),
}

# 48 tiny elementwise launches of one forward (PyTorch kernels), ~2 us each.
TINY_KERNELS = [
    ("void at::native::vectorized_elementwise_kernel<4, at::native::sin_kernel_cuda(at::TensorIteratorBase&)::"
     "{lambda()#2}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >(int, ...)", 2.21),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, float, "
     "at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul> >(int, ...)", 1.95),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctorOnSelf_add<float>, "
     "std::array<char*, 2ul> >(int, at::native::CUDAFunctorOnSelf_add<float>, std::array<char*, 2ul>)", 1.93),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::launch_clamp_scalar(at::TensorIteratorBase&, "
     "c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::"
     "{lambda()#8}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >(int, ...)", 2.02),
]  # fmt: skip
TINY = {
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": 1.9,
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": 2.6,
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed": 0.4,
    "l1tex__throughput.avg.pct_of_peak_sustained_active": 2.6,
    "lts__throughput.avg.pct_of_peak_sustained_elapsed": 1.1,
    "dram__bytes_read.sum": 0.0,
    "dram__bytes_write.sum": 0.0,
    "launch__block_size": 128,
    "launch__grid_size": 8,
    "launch__registers_per_thread": 24,
    "launch__occupancy_limit_warps": 16,
    "launch__occupancy_limit_registers": 21,
    "launch__waves_per_multiprocessor": 0.0038,
    "sm__warps_active.avg.pct_of_peak_sustained_active": 6.2,
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": 512,
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": 32,
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum": 512,
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum": 32,
    "sm__sass_data_bytes_mem_global_op_ld.sum": 0.016,
    "sm__sass_data_bytes_mem_global_op_st.sum": 0.016,
}


def _cell(value: object) -> str:
    if isinstance(value, int):
        return f"{value:,}"  # ncu writes thousands separators
    if isinstance(value, float):
        return f"{value:,.2f}"
    return str(value)


def write_csv(path: Path, rows: list[dict[str, object]], units: dict[str, str], rename: dict[str, str]) -> None:
    metrics = [rename.get(m, m) for m in UNITS]
    buf = io.StringIO()
    w = csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n")
    w.writerow(ID_COLUMNS + metrics)
    w.writerow([""] * len(ID_COLUMNS) + [units.get(m, UNITS[m]) for m in UNITS])
    for row in rows:
        w.writerow([_cell(row[c]) for c in ID_COLUMNS] + [_cell(row[m]) for m in UNITS])
    path.write_text(buf.getvalue())


def launch_row(i: int, kernel: str, block: tuple, grid: tuple, metrics: dict) -> dict[str, object]:
    return {"ID": i, "Process ID": 41235, "Process Name": "python3.12", "Host Name": "127.0.0.1", "Kernel Name": kernel,
            "Context": 1, "Stream": 7, "Block Size": str(block), "Grid Size": str(grid), "Device": 0, "CC": "9.0",
            **{m: metrics.get(m, BASE[m]) for m in UNITS}}  # fmt: skip


def main() -> None:
    for name, spec in SCENARIOS.items():
        rows = []
        for i in range(spec["launches"]):
            m = dict(spec["metrics"])
            m["gpu__time_duration.sum"] = round(
                m["gpu__time_duration.sum"] * (1 + 0.01 * i), 3
            )  # launches differ a bit
            rows.append(launch_row(i, spec["kernel"], spec["block"], spec["grid"], m))
        write_csv(HERE / f"synthetic_{name}.csv", rows, spec.get("units", {}), spec.get("rename", {}))
    rows = []
    for i in range(48):
        kernel, us = TINY_KERNELS[i % 4]
        rows.append(launch_row(i, kernel, (128, 1, 1), (8, 1, 1), {**TINY, "gpu__time_duration.sum": us}))
    write_csv(HERE / "synthetic_many_tiny_launches.csv", rows, {"gpu__time_duration.sum": "usecond"}, {})
    # What the capture script's PyTorch-profiler pass writes: 10 forwards of 48 launches, ~6 us of host time each.
    profile = {
        "source": "torch.profiler",
        "forwards": 10,
        "forward_time_us": 291.5,
        "kernels": [{"name": k, "count": 120, "total_time_us": round(us * 120, 1)} for k, us in TINY_KERNELS],
    }
    (HERE / "synthetic_many_tiny_launches.run_features.json").write_text(json.dumps(profile, indent=2) + "\n")
    # A capture limited to the speed-of-light section (--section SpeedOfLight): most fields are missing.
    sol = ["gpu__time_duration.sum", "sm__throughput.avg.pct_of_peak_sustained_elapsed",
           "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
           "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"]  # fmt: skip
    buf = io.StringIO()
    w = csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n")
    w.writerow(ID_COLUMNS + sol)
    w.writerow([""] * len(ID_COLUMNS) + ["nsecond", "%", "%", "%"])
    row = launch_row(0, "scale_shift_kernel", (256, 1, 1), (16384, 1, 1), {})
    w.writerow([_cell(row[c]) for c in ID_COLUMNS] + ["116,200", "18.40", "92.30", "92.30"])
    (HERE / "synthetic_sol_only.csv").write_text("==PROF== Connected to process 41235\n" + buf.getvalue())


if __name__ == "__main__":
    main()
