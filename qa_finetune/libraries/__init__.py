"""The third-party libraries as qa-finetune uses them: their private APIs, each behind one
function with the versions it was checked against (``compat``), and the optional extras,
imported on demand or named in a one-line error (``extras``). No heavy import at import time."""
