"""Clip in, clip out, files out: bake, clip tools, compression, retargeting, export and the writers."""
