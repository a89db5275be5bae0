"""Features that follow verl's ``verl.experimental`` paths (the agent loop of ``rollout.mode=async``)."""
