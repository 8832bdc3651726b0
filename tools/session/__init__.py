"""Session workspace: runs/<run_id>/opt<n>/... and the dftracer-io-optimization skill's artifacts."""
