Feature: Interactive processes, terminals and logs
  A stdio process is a command whose input the host writes and whose output it reads with long polls;
  a terminal is a shell on a pseudo-terminal the host types into, reads and resizes; a log follow
  streams a sandbox's log until it ends or the host cancels it. Bytes to and from processes and
  terminals are never sanitized, ids the host picks are never reused, and a waiting output read never
  holds up anything else.

  @id:stdio-round-trip @req:SDP1-023 @req:SKETCH-013 @must @cap:exec.stdio_process
  Scenario: A stdio process gets its input, gives back its output, and reports how it ended
    Given a sandbox
    When I open a stdio process running `cat`
    And I send a generated line to the process
    Then the process echoes that line
    When I close the process's input
    Then the process's output ends
    And waiting for the process reports termination exited with exit code 0

  @id:stdio-raw @req:SDP1-071 @req:SKETCH-013 @must @cap:exec.stdio_process
  Scenario: Bytes through a stdio process come back raw, escape sequences and control bytes included
    Given a sandbox
    When I open a stdio process running `cat`
    And I send the process bytes full of terminal escape sequences and control characters
    And I close the process's input
    Then the process echoes exactly those bytes

  @id:stdio-duplicate-id @req:SDP1-076 @req:SKETCH-013 @must @cap:exec.stdio_process
  Scenario: A second stdio process with an id already in use is refused as invalid_spec naming process_id
    Given a sandbox
    When I open a stdio process running `cat`
    And I open another stdio process with the same id
    Then the second open is refused as invalid_spec naming process_id
    And the first process still echoes what it is sent

  # Process ids are unique per connection (v1 section 8.4), not per sandbox.
  @id:stdio-duplicate-id-other-sandbox @req:SDP1-076 @req:SKETCH-013 @must @cap:exec.stdio_process
  Scenario: A stdio process with an id already in use in another sandbox is refused as invalid_spec naming process_id
    Given a sandbox
    When I open a stdio process running `cat`
    And I open a stdio process with the same id in another sandbox
    Then the second open is refused as invalid_spec naming process_id
    And the first process still echoes what it is sent

  @id:stdio-long-poll @req:SDP1-077 @req:SKETCH-013 @must @cap:exec.stdio_process
  Scenario: A waiting read of a process's output holds up neither other requests, input nor terminate
    Given a sandbox
    When I open a stdio process running `cat`
    And I start reading the process's output while it has none to give
    Then an unrelated request is answered while the read waits
    And input to the process is accepted while the read waits
    And the waiting read then returns that input
    When I start reading the process's output while it has none to give
    Then terminating the process is answered while the read waits
    And the waiting read then reports the end of the output

  @id:stdio-input-not-serialized @req:SDP1-007 @req:SDP1-077 @req:SDP2-S35 @req:SKETCH-013 @must @cap:exec.stdio_process
  Scenario: Input that a process is not reading holds up only that input, never another process or a terminate
    Given a sandbox
    When I open a stdio process running `sleep 30`
    And I start sending the process more input than a pipe holds
    Then a second stdio process running `cat` echoes a line while that input waits
    And terminating the process is answered while that input waits
    And the waiting input is then answered

  @id:stdio-many-long-polls @req:SDP1-007 @req:SDP1-077 @req:SKETCH-013 @must @cap:exec.stdio_process
  Scenario: However many output reads are waiting, other requests are still answered
    Given a sandbox
    When 6 stdio processes running `cat` each have an output read waiting
    Then the provider's health and a description of the sandbox are answered while those reads wait

  @id:stdio-stderr-tail-exact @req:SDP1-023 @req:SKETCH-013 @must @cap:exec.stdio_process
  Scenario: A stderr of exactly the tail's size comes back whole, not marked as cut
    Given a sandbox
    When I open a stdio process running `head -c 8192 /dev/zero | tr '\0' e >&2`
    Then waiting for the process reports a stderr tail of exactly 8192 letters e

  @id:stdio-output-after-exit @req:SDP1-023 @req:SDP1-108 @req:SKETCH-013 @must @cap:exec.stdio_process
  Scenario: What a process wrote before it ended is read in full after it ended
    # Read only once the process has surely exited: output still queued then must not be lost.
    Given a sandbox
    When I open a stdio process running `printf 'last words'`
    And I let the process end before reading its output
    Then the process's output is "last words"

  @id:stdio-env @req:SDP1-023 @req:SKETCH-013 @must @cap:exec.stdio_process
  Scenario: A stdio process gets the variables it was opened with
    Given a sandbox
    When I open a stdio process running `printf '%s' "$CONFORMANCE_STDIO"` with the variable CONFORMANCE_STDIO set to "for-the-process"
    Then the process's output is "for-the-process"

  @id:stdio-sandbox-env @req:SDP1-051 @req:SDP1-023 @req:SKETCH-013 @must @cap:exec.stdio_process
  Scenario: A stdio process gets the variables its sandbox was created with
    Given a sandbox created with the variable CONFORMANCE_LAYER set to "sandbox"
    When I open a stdio process running `printf '%s' "$CONFORMANCE_LAYER"`
    Then the process's output is "sandbox"

  @id:stdio-working-dir @req:SDP1-081 @req:SDP1-023 @req:SKETCH-013 @must @cap:exec.stdio_process
  Scenario: A stdio process opened in a directory given relative to the sandbox's working directory starts there
    Given a sandbox
    When I open a stdio process running `pwd` in a new directory of the sandbox, given by its path relative to the sandbox's working directory
    Then the process's output is that directory's absolute path, followed by a newline

  @id:stdio-empty-input @req:SDP1-023 @req:SKETCH-013 @must @cap:exec.stdio_process
  Scenario: Input of no bytes at all is not the end of a process's input
    Given a sandbox
    When I open a stdio process running `cat`
    And I send the process an empty piece of input
    And I send a generated line to the process
    Then the process echoes that line

  @id:stdio-id-free-after-failed-open @req:SDP1-076 @req:SKETCH-013 @must @cap:exec.stdio_process
  Scenario: A process id whose open failed is free for the next open
    Given a sandbox
    When I open a stdio process in a directory that does not exist
    Then that open is refused
    And opening a stdio process running `cat` with the same id succeeds

  @id:stdio-input-large @req:SDP1-023 @req:SKETCH-013 @must @cap:exec.stdio_process
  Scenario: Input far larger than a pipe holds reaches the process whole
    Given a sandbox
    When I open a stdio process running `wc -c`
    And I send the process 300 KiB of input at once
    And I close the process's input
    Then the process's output is "307200", once blanks are trimmed

  @id:stdio-terminate-only-that-one @req:SDP1-023 @req:SKETCH-013 @must @cap:exec.stdio_process
  Scenario: Terminating one process leaves the sandbox's other processes running
    Given a sandbox
    When I open a stdio process running `cat`
    And I open a second stdio process running `cat`
    And I terminate the process
    Then the second process still echoes what it is sent

  @id:stdio-delete-only-that-sandbox @req:SDP1-023 @req:SKETCH-013 @must @cap:exec.stdio_process
  Scenario: Deleting one sandbox leaves a stdio process of another sandbox running
    Given a sandbox
    When I open a stdio process running `cat`
    And I create another sandbox and delete it
    Then the first process still echoes what it is sent

  @id:stdio-terminated-termination @req:SDP1-073 @req:SKETCH-013 @should @cap:exec.stdio_process
  Scenario: A terminated process is reported with one of the protocol's termination names
    Given a sandbox
    When I open a stdio process running `sleep 30`
    And I terminate the process
    Then waiting for the process reports one of the terminations exited, timed_out, cancelled, killed or unknown

  @id:stdio-signalled-no-exit-code @req:SDP1-S24 @req:SKETCH-013 @should @cap:exec.stdio_process
  Scenario: A process that a signal ends reports no exit code, not the shell's 128 plus the signal's number
    Given a sandbox
    When I open a stdio process running `kill -KILL $$`
    Then waiting for the process reports that it ended without an exit code

  # The tail is the newest 8 KiB at most, and says so when earlier bytes were dropped: it starts with "…".
  @id:stdio-stderr-tail @req:SDP1-023 @req:SKETCH-013 @must @cap:exec.stdio_process
  Scenario: Waiting for a process reports the newest part of what it wrote to stderr, marked as cut
    Given a sandbox
    When I open a stdio process running `head -c 20000 /dev/zero | tr '\0' e >&2; printf END-OF-STDERR >&2`
    Then waiting for the process reports a stderr tail that ends with "END-OF-STDERR"
    And that stderr tail starts with the cut mark "…" and keeps at most 8 KiB after it

  @id:stdio-stderr-tail-verbatim @req:SDP1-023 @req:SKETCH-013 @must @cap:exec.stdio_process
  Scenario: A short stderr comes back in the tail exactly as written, leading blanks and line ends included
    Given a sandbox
    When I open a stdio process running `printf '  indented\n\tlast line\n\n' >&2`
    Then waiting for the process reports a stderr tail of exactly "  indented\n\tlast line\n\n"

  @id:stdio-terminate-group @req:SDP1-023 @req:SKETCH-013 @must @cap:exec.stdio_process
  Scenario: Terminating a process ends the commands it started too, so its output ends
    Given a sandbox
    # The child announces itself, so the terminate cannot land before the shell has started it.
    When I open a stdio process running `sh -c 'echo started; exec sleep 30'; printf never`
    And the process has written "started"
    And I terminate the process
    Then the process's output ends within 5 seconds

  @id:stdio-unknown-id @req:SDP1-S22 @req:SDP1-045 @req:SKETCH-013 @must @cap:exec.stdio_process
  Scenario: Calls naming a process id that was never opened are refused as invalid_spec naming process_id
    Given a sandbox
    Then input, output, terminate and wait for a process id never opened are each refused as invalid_spec naming process_id

  @id:pty-unknown-id @req:SDP1-S22 @req:SDP1-045 @req:SKETCH-013 @must @cap:pty
  Scenario: Calls naming a terminal id that was never opened are refused as invalid_spec naming pty_id
    Given a sandbox
    Then input, output and resize for a terminal id never opened are each refused as invalid_spec naming pty_id

  @id:pty-echo-resize @req:SDP1-023 @req:SKETCH-013 @must @cap:pty @cap:pty.resize
  Scenario: A terminal opens at the size asked for, echoes what is typed, runs it, and follows a resize
    # Sizes are 16-bit: more than 255 columns at the open, more than 255 rows at the resize.
    Given a sandbox
    When I open a terminal of 37 rows and 300 columns
    And I type `stty size` into the terminal
    Then the terminal echoes what I typed
    And the terminal reports its size as 37 rows and 300 columns
    When I resize the terminal to 300 rows and 100 columns
    And I type `stty size` into the terminal
    Then the terminal reports its size as 300 rows and 100 columns

  @id:pty-raw @req:SDP1-071 @req:SKETCH-013 @must @cap:pty
  Scenario: A terminal passes a program's escape sequences through unchanged
    Given a sandbox
    When I open a terminal of 24 rows and 80 columns
    And I type `printf '\033[1;31m%s\033[0m\n' conformance-$((6*7))` into the terminal
    Then the terminal passes the colour escape sequences through unchanged

  @id:pty-duplicate-id @req:SDP1-076 @req:SKETCH-013 @must @cap:pty
  Scenario: A second terminal with an id already in use is refused as invalid_spec naming pty_id
    Given a sandbox
    When I open a terminal of 24 rows and 80 columns
    And I open another terminal with the same id
    Then the second open is refused as invalid_spec naming pty_id
    And the first terminal still runs what is typed

  @id:pty-long-poll @req:SDP1-077 @req:SKETCH-013 @must @cap:pty @cap:pty.resize
  Scenario: A waiting read of a terminal's output holds up neither resize nor input
    Given a sandbox
    When I open a terminal of 24 rows and 80 columns
    And I type `stty -echo; printf 'waiting-%s\n' for-input; read -r line; printf 'got-%s\n' "$line"` into the terminal
    Then the terminal shows "waiting-for-input"
    When I start reading the terminal's output while it has none to give
    Then resizing the terminal is answered while the read waits
    And typing `conformance` into the terminal is accepted while the read waits
    And the waiting read then returns output
    And the terminal shows "got-conformance"

  @id:pty-working-dir @req:SDP1-081 @req:SDP1-023 @req:SKETCH-013 @must @cap:pty
  Scenario: A terminal opened in a directory starts its shell there
    Given a sandbox
    When I open a terminal of 24 rows and 80 columns in a new directory of the sandbox
    And I type `printf 'cwd=%s\n' "$PWD"` into the terminal
    Then the terminal shows that directory

  @id:pty-close-unknown @req:SDP1-S21 @should @cap:pty
  Scenario: Closing a terminal id that is not open succeeds
    Given a sandbox
    Then closing a terminal id that was never opened succeeds

  @id:logs-cancel-unknown @req:SDP1-S21 @should @cap:logs.entrypoint
  Scenario: Cancelling a stream id that no follow uses succeeds, and a follow that then starts with it ends at once
    Given a sandbox
    When I cancel a stream id that no follow uses yet
    Then the cancel succeeds
    When I follow the sandbox's entrypoint log with that stream id
    Then the follow ends with an answer

  @id:pty-env @req:SDP1-023 @req:SKETCH-013 @must @cap:pty
  Scenario: A terminal's shell gets the variables it was opened with, TERM included
    Given a sandbox
    When I open a terminal of 24 rows and 80 columns with TERM set to "dumb"
    And I type `printf 'term=%s\n' "$TERM"` into the terminal
    Then the terminal shows "term=dumb"

  @id:pty-sandbox-env @req:SDP1-051 @req:SDP1-023 @req:SKETCH-013 @must @cap:pty
  Scenario: A terminal's shell gets the variables its sandbox was created with
    Given a sandbox created with the variable CONFORMANCE_LAYER set to "sandbox"
    When I open a terminal of 24 rows and 80 columns
    And I type `printf 'layer=%s\n' "$CONFORMANCE_LAYER"` into the terminal
    Then the terminal shows "layer=sandbox"

  @id:pty-exit-ends-output @req:SDP1-023 @req:SKETCH-013 @must @cap:pty
  Scenario: Once a terminal's shell exits, reading the terminal reports the end of the session
    Given a sandbox
    When I open a terminal of 24 rows and 80 columns
    And I type `exit` into the terminal
    Then reading the terminal reports the end of the session within 10 seconds

  @id:logs-provision @req:SDP1-079 @req:SKETCH-013 @must @cap:logs.provision
  Scenario: A follow of the provision log delivers its output before its final answer
    Given a sandbox
    When I follow the sandbox's provision log to its end
    Then the follow delivered some log output
    And every piece of log output arrived before the follow's answer

  @id:logs-cancel @req:SDP1-079 @req:SKETCH-013 @must @cap:logs.entrypoint
  Scenario: An open follow ends with an answer once it is cancelled
    Given a sandbox
    When I follow the sandbox's entrypoint log
    And I cancel the follow
    Then the follow ends with an answer
    And every piece of log output arrived before the follow's answer

  @id:logs-cancel-only-that-one @req:SDP1-079 @req:SDP1-023 @req:SKETCH-013 @must @cap:logs.entrypoint
  Scenario: Cancelling one follow leaves another follow of the same log open
    Given a sandbox
    When I follow the sandbox's entrypoint log
    And I follow the sandbox's entrypoint log a second time, with another stream id
    And I cancel the follow
    Then the follow ends with an answer
    And the second follow is still open
    When I cancel the second follow
    Then the second follow ends with an answer

  # v1 section 8.4: logs/follow answers "after the stream ends". The log of a sandbox that was deleted has
  # ended: nothing more can be written to it. The follow may end with its empty answer or with an error
  # report (the sandbox is gone); it may not stay open until the host cancels it.
  @id:logs-follow-ends-on-delete @req:SDP1-079 @must @cap:logs.entrypoint
  Scenario: A follow of a sandbox's log ends once the sandbox is deleted
    Given a sandbox
    When I follow the sandbox's entrypoint log
    And I delete the sandbox
    Then the follow ends, with its empty answer or an error report
    And every piece of log output arrived before the follow's answer

  @id:logs-unknown-sandbox @req:SDP1-S17 @req:SKETCH-013 @must @cap:logs.entrypoint
  Scenario: Following the log of a sandbox id that was never issued is refused as not_found
    Given a provider
    When I follow the entrypoint log of a sandbox id that was never issued
    Then the follow is refused as not_found
