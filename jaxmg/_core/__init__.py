"""The shared routine layer: placement, tiles, native engines, GPU contexts, the call pipeline."""
