"""Rendering the hosts that need JavaScript: detection, marks, the browser, the gate of its requests."""
