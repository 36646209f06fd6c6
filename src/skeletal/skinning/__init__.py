"""Skinning on the CPU: linear blend (lbs) and dual quaternion (dqs) kernels."""
