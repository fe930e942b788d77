@dialect:sandbox-driver-v2
Feature: Version 2 commands: argument vectors, stops and input
  A version 2 command is an argument vector, run the way execvp runs one: no shell comes between the host
  and the program, so nothing in an argument is expanded, split or sourced, and Bash runs only when the
  host asks for `bash -c` itself. The environment reaches the program exactly as given. A host stops a
  command with a gentle stop, which the command may ignore, or a hard one, which it cannot; the provider's
  own stop at a timeout is hard unless the host gave it a grace period. A command's input arrives up to the
  host's end of file; its output reaches the host on the channel, and the provider keeps no copy of it
  unless asked.

  Background:
    Given a sandbox

  # -- argument vectors ----------------------------------------------------------------------------

  @id:v2-exec-argv-literal @req:SDP2-066 @must
  Scenario: Every argument reaches the program exactly as given: no expansion, no splitting, no globbing
    # A file for the star to match, where a shell would expand it.
    Given a file "glob-bait.txt" holding generated text
    When I run a program with exactly these arguments, in the sandbox's working directory
      | printf          |
      | [%s]            |
      | $HOME           |
      | *               |
      | ;               |
      | $(id -u)        |
      | `id -u`         |
      | two words       |
      | it's "quoted"   |
    Then stdout is exactly "[$HOME][*][;][$(id -u)][`id -u`][two words][it's "quoted"]"

  @id:v2-exec-argv-lookup @req:SDP2-066 @must
  Scenario Outline: A program is found as execvp finds it: <case>
    Given an executable "<file>" in the sandbox's working directory that prints "from the working directory"
    When I run a program with exactly these arguments, in the sandbox's working directory
      | <program> |
      | %s        |
      | given     |
    Then stdout is exactly "<expected>"

    Examples:
      | case                                      | file   | program | expected                   |
      | a name, on PATH and never in the work dir | printf | printf  | given                      |
      | a path, relative to the command's dir     | tool   | ./tool  | from the working directory |

  @id:v2-exec-missing-program @req:SDP2-066 @must
  Scenario: A program that does not exist is a failure to start it, not a shell's exit code 127
    When I run a program with exactly these arguments
      | conformance-no-such-program |
    Then the command could not be started, and the provider said so instead of reporting an exit code

  @id:v2-exec-no-shell-of-its-own @req:SDP2-066 @req:SDP2-067 @must
  Scenario: No shell runs unless the host asks for one: a startup file named by BASH_ENV is not sourced
    Given a Bash startup file in the sandbox that prints "the startup file was sourced; "
    When I run a program with exactly these arguments, with BASH_ENV pointing at that startup file
      | printf           |
      | the program ran  |
    Then stdout is exactly "the program ran"

  @id:v2-exec-bash-when-asked @req:SDP2-066 @req:SDP2-067 @must
  Scenario: Bash asked for with bash -c runs with the environment as given, BASH_ENV included
    Given a Bash startup file in the sandbox that prints "the startup file was sourced; "
    When I run `printf 'the command ran'` with BASH_ENV pointing at that startup file
    Then stdout is exactly "the startup file was sourced; the command ran"

  @id:v2-exec-env-unchanged @req:SDP2-067 @must
  Scenario: The environment reaches the program unchanged, BASH_ENV and empty values included
    When I run a program with exactly these arguments, with BASH_ENV set to "/conformance/startup" and CONFORMANCE_EMPTY set to an empty value
      | printenv          |
      | BASH_ENV          |
      | CONFORMANCE_EMPTY |
    Then stdout is exactly "/conformance/startup\n\n"

  # -- stops ---------------------------------------------------------------------------------------

  @id:v2-exec-stop-term @req:SDP2-140 @cap:exec.stop @must
  Scenario: A gentle stop ends a command that heeds it, reported as cancelled
    When I start streaming `printf ready; sleep 30` and it has printed "ready"
    And the host stops it gently
    Then the command ended within 3 seconds, reported as cancelled

  @id:v2-exec-stop-term-ignored @req:SDP2-140 @cap:exec.stop @must
  Scenario: A command that ignores a gentle stop keeps running until a hard stop, reported as killed
    When I start streaming `trap '' TERM; printf ready; while :; do sleep 0.1; done` and it has printed "ready"
    And the host stops it gently
    # longer than the 2 s grace of v1's stop ladder (TERM, then KILL), which v2's gentle stop never runs
    Then the command is still running 2.5 seconds later
    When the host stops it hard
    Then the command ended within 3 seconds, reported as killed

  # Upstream's exec_stop_grace_escalates_a_term. A backend that cannot signal may end the command on the term at
  # once, reported as cancelled with no signal (SDP2-140's note); otherwise the grace is honoured, then a kill.
  @id:v2-exec-stop-grace-term @req:SDP2-S51 @cap:exec.stop @must
  Scenario: Given a stop grace, a command that ignores a gentle stop is killed once the grace has passed
    When I start streaming `trap '' TERM; printf ready; while :; do sleep 0.1; done` with a stop grace of 2 seconds and it has printed "ready"
    And the host stops it gently
    Then the command ended at least 2 and at most 5 seconds after the stop, reported as cancelled or killed, unless it ended at once as cancelled with no signal

  @id:v2-exec-stop-no-such-exec @req:SDP2-110 @cap:exec.stop @must
  Scenario Outline: Stopping a command that is not running succeeds and does nothing: <case>
    When the host stops <which> <how>
    Then the stop succeeded

    Examples:
      | case                   | which                      | how    |
      | unknown, gently        | a command it never started | gently |
      | unknown, hard          | a command it never started | hard   |
      | already ended, gently  | a command that has ended   | gently |
      | already ended, hard    | a command that has ended   | hard   |

  @id:v2-exec-timeout-kills @req:SDP2-141 @req:SDP2-074 @must
  Scenario: At its timeout a command is killed outright, not asked to stop, and reported as timed out
    When I run `trap 'printf got-term; exit 3' TERM; printf started; while :; do sleep 0.1; done` with a timeout of 1 second
    Then the result says the command timed out, at most 3 seconds after the timeout
    And stdout is exactly "started"

  # stop_grace_ms is additive: "A plugin built before the field ignores it and keeps raw stops" (section 8.4),
  # as upstream's host at the transport-hardening era does; no capability says which a plugin is.
  @id:v2-exec-timeout-grace @req:SDP2-141 @must
  Scenario: Given a stop grace, a command at its timeout is asked to stop and killed after the grace, or killed outright by a provider that predates the grace; either way it timed out
    When I run `trap 'printf got-term' TERM; printf started; while :; do sleep 0.1; done` with a timeout of 1 second and a stop grace of 1 second
    Then the result says the command timed out: asked to stop and killed after the grace, 1.8 to 5 seconds after it started, or killed outright at the timeout, at most 4 seconds after it started

  # -- input ---------------------------------------------------------------------------------------

  @id:v2-exec-stdin-streamed @req:SDP2-075 @cap:exec.stdin_stream @must
  Scenario: Streamed input reaches the command whole, up to the host's end of file
    When I run `wc -c; printf 'saw end of file'` with 1 MiB and 1 byte of patterned bytes as its stdin
    Then stdout is exactly "1048577\nsaw end of file"

  @id:v2-exec-stdin-live @req:SDP2-075 @cap:exec.stdin_stream @must
  Scenario: Streamed input reaches the command while it runs, before the host's end of file
    # The command answers its first line at once, then reads on to the end of file: a provider that collects
    # the input up to the host's end of file before it starts the command shows nothing until the host ends it.
    When I start streaming `IFS= read -r line; printf 'got:%s' "$line"; cat >/dev/null; printf ' then end of file'`, feeding its input while it runs
    And I send it the line "hello", keeping its input open
    Then it prints "got:hello" within 5 seconds, while its input is still open
    When I end its input
    Then the streamed command exits with code 0, having printed "got:hello then end of file"

  @id:v2-exec-stdin-fixed @req:SDP2-075 @cap:exec.stdin @must
  Scenario: Fixed input, collected up to the host's end of file, reaches the command whole
    Given the provider takes a command's input whole rather than streamed
    When I run `wc -c; printf 'saw end of file'` with 1 MiB and 1 byte of patterned bytes as its stdin
    Then stdout is exactly "1048577\nsaw end of file"

  # -- exec ids and retention ----------------------------------------------------------------------

  @id:v2-exec-duplicate-id @req:SDP2-099 @must
  Scenario: A second command under the id of one still running is refused, naming exec_id
    When I start streaming `printf ready; sleep 1` and it has printed "ready"
    And I start another streamed command under the same exec id
    Then that second command is refused as an invalid spec naming exec_id
    And the first command still ends normally

  @id:v2-exec-duplicate-id-other-sandbox @req:SDP2-099 @must
  Scenario: A command in another sandbox under the id of one still running is refused, naming exec_id
    When I start streaming `printf ready; sleep 1` and it has printed "ready"
    And I start another streamed command under the same exec id in another sandbox
    Then that second command is refused as an invalid spec naming exec_id
    And the first command still ends normally

  @id:v2-exec-retains-nothing @req:SDP2-S32 @must
  Scenario: Without a retained output limit the provider keeps no copy of the output, and counts all of it
    When I stream `head -c 100000 /dev/zero` without a retained output limit
    Then the stdout capture counts 100000 bytes observed, none retained, all omitted
