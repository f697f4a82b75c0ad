"""The accelerator types of the Vertex AI API (google.cloud.aiplatform.v1.AcceleratorType): a catalog fact
that the job kinds, the clusters and the scheduler's inventory all read."""

from __future__ import annotations

from trainworks.kernel.wire import ProtoEnum


class AcceleratorType(ProtoEnum):
    ACCELERATOR_TYPE_UNSPECIFIED = 0
    NVIDIA_TESLA_K80 = 1
    NVIDIA_TESLA_P100 = 2
    NVIDIA_TESLA_V100 = 3
    NVIDIA_TESLA_P4 = 4
    NVIDIA_TESLA_T4 = 5
    TPU_V2 = 6
    TPU_V3 = 7
    NVIDIA_TESLA_A100 = 8
    NVIDIA_A100_80GB = 9
    TPU_V4_POD = 10
    NVIDIA_L4 = 11
    TPU_V5_LITEPOD = 12
    NVIDIA_H100_80GB = 13
    NVIDIA_H100_MEGA_80GB = 14
    NVIDIA_H200_141GB = 15
    NVIDIA_B200 = 16
    NVIDIA_GB200 = 17
    NVIDIA_RTX_PRO_6000 = 18
