"""Task images: checking pinned digests against the machine and registries (`digests`), and building the embedded
demo task's image (`demo`)."""
