"""Session workspace: runs/<run_id>/opt<n>/... and the seed's artifacts."""
