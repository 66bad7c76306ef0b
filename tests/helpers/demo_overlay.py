"""The demo's overlay patch (one extra test file) and where a checkout of the upstream repository keeps it."""

OVERLAY_PATH = "data/overlays/demo/0001-extra-test.patch"
OVERLAY = b"""diff --git a/tests/test_overlay.py b/tests/test_overlay.py
new file mode 100644
--- /dev/null
+++ b/tests/test_overlay.py
@@ -0,0 +1,2 @@
+def test_overlay_is_applied():
+    assert True
"""
