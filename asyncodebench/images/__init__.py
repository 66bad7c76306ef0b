"""Task images: checking pinned digests against the machine and registries (`digests`), the image toolkit for
images made on this machine (`toolkit`) and the local registry they are pushed to (`registry`), and the embedded
demo task's image (`demo`)."""
