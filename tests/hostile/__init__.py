"""Small hostile plugins: what a provider author's buggy plugin does to a harness (hangs, floods, bad
bytes, leftovers, secrets echoed in every encoding). Each is a script run as a real process (or, where a
process is not the point, served in process: ``secret_spraying.serve``); the tests next to them assert
the suite's bounded outcome (exit code, outcome, the message naming the cause)."""
