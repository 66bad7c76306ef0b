"""Scripts copied into task containers and run there with the task's own Python (standard library only)."""
