"""Session workspace: runs/<run_id>/opt<n>/... and the per-iteration artifacts of the dftracer-io-optimization skill."""
