"""Code features: what a candidate's source says about itself, read by rules (regular expressions over its CUDA,
Python ASTs of its Triton kernels and host code) or asked of an LLM. See extract.py for the entry point."""

from kernelskill.memory.features.extract import FeatureJudge, FeatureValue, extract_features

__all__ = ["FeatureJudge", "FeatureValue", "extract_features"]
