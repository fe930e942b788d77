"""Small hostile plugins: what a provider author's buggy plugin does to a harness (hangs, floods, bad
bytes, leftovers). Each is a script run as a real process; the tests next to them assert the suite's
bounded outcome (exit code, outcome, the message naming the cause)."""
