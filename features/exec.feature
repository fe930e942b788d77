Feature: Running commands
  A command is Bash source. Whatever it does, the provider reports what happened: its exit code,
  what it wrote to stdout and to stderr, byte for byte. A command that fails is a result, not an
  error of the provider.

  Background:
    Given a sandbox

  @id:exec-exit-code @req:SDP1-S01 @req:SDP1-073 @must
  Scenario Outline: The command's exit code is reported
    When I run `exit <code>`
    Then the command ran and exited with code <code>

    Examples:
      | code |
      | 0    |
      | 1    |
      | 42   |

  @id:exec-nonzero-is-a-result @req:SDP1-S07 @must
  Scenario: A failing command is a result that still carries its output, not an error
    When I run `printf 'about to fail'; printf 'failing' >&2; exit 3`
    Then the command ran and exited with code 3
    And stdout is exactly "about to fail"
    And stderr is exactly "failing"

  @id:exec-separate-streams @req:SDP1-S04 @must
  Scenario: stdout and stderr are reported separately
    When I run `printf 'to stdout'; printf 'to stderr' >&2`
    Then stdout is exactly "to stdout"
    And stderr is exactly "to stderr"

  @id:exec-env @req:SDP1-S02 @must
  Scenario: Variables given with the command reach it
    When I run `printf '%s' "$CONFORMANCE_GREETING"` with the variable CONFORMANCE_GREETING set to a generated value
    Then stdout is exactly that generated value

  @id:exec-working-dir @req:SDP1-S03 @must
  Scenario: A command runs in the working directory it is given
    When there is a directory "conformance-wd" in the sandbox
    And I run `pwd` in that directory, given by its absolute path
    Then stdout is that directory's absolute path, followed by a newline

  @id:exec-binary-output @req:SDP1-035 @must
  Scenario: Command output is binary-safe: every byte value comes back unchanged
    When I run a command that writes every byte value from 0 to 255 to stdout
    Then stdout is exactly every byte value from 0 to 255, in order
