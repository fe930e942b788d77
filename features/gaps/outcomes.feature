Feature: GAP 3 — a command that ran versus a sandbox that could not run it
  An exit code is the program's verdict on itself, and only a program that ran has one. A command that
  fails is still a result. A timeout is a termination, not an exit code borrowed from a shell
  convention (124, 137). A command sent to a sandbox that does not exist, or no longer does, is an
  error of the provider, never an exit code such as 127 — conflating the two turned infrastructure
  faults into sticky code failures for forkd's users.

  Background:
    Given a sandbox

  @id:exec-nonzero-is-a-result @req:GAP-3 @req:SDP1-S07 @must
  Scenario: A failing command is a result that still carries its output, not an error
    When I run `printf 'about to fail'; printf 'failing' >&2; exit 3`
    Then the command ran and exited with code 3
    And stdout is exactly "about to fail"
    And stderr is exactly "failing"

  @id:ran-is-reported-ran @req:GAP-3 @req:SKETCH-005 @must
  Scenario: A command that ran is reported as having run
    When I run `exit 7`
    Then the command ran and exited with code 7
    And the command is reported as ran, at stage exec where the dialect reports a stage

  @id:timeout-is-not-an-exit-code @req:GAP-3 @req:SDP1-074 @must
  Scenario: A command that outlives its timeout has timed out; it did not exit with a code
    When I run `sleep 20` with a timeout of 1 second
    Then the command timed out, without an exit code pretending to be the program's

  @id:exec-unknown-sandbox-is-an-error @req:GAP-3 @req:SKETCH-007 @req:SDP1-S17 @must
  Scenario: A command for a sandbox that was never created is an error, not an exit code
    When I run a command in a sandbox id that was never issued
    Then the provider answers an error, not an exit code

  @id:exec-deleted-sandbox-is-an-error @req:GAP-3 @gap
  Scenario: A command for a deleted sandbox is an error, not an exit code
    When I delete the sandbox
    And I run a command in the deleted sandbox
    Then the provider answers an error, not an exit code
