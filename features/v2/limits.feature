@dialect:sandbox-driver-v2
Feature: Version 2 transport limits a provider enforces
  A version 2 provider bounds what one connection can make it hold: a control line it reads is at most
  1 MiB, and so is an answer it writes; a fixed input it collects before running a command is at most
  16 MiB, and so is a retained copy of a command's output. Past a limit it refuses in words that name the
  limit, or, for a line it cannot read, ends the connection. A shutdown does not wait for running commands: it cancels them.

  # Admission limits (overloaded: 1,024 active data operations, 2,048 requests in flight, reserved
  # methods getting through) are left out: provoking them takes thousands of concurrent operations.

  @id:v2-limit-control-line-read @req:SDP2-S46 @must
  Scenario: A control line of more than 1 MiB ends the connection
    Given a freshly started provider that has been initialized
    When the host sends a request line of 1 MiB and 1 byte
    Then the provider process exits within 5 seconds

  @id:v2-limit-control-line-at-limit @req:SDP2-S46 @must
  Scenario: A control line of exactly 1 MiB, newline included, is within the limit and answered
    Given a freshly started provider that has been initialized
    When the host sends a request line of exactly 1 MiB, newline included
    Then the provider answered that request

  @id:v2-limit-answer-too-large @req:SDP2-S47 @must
  Scenario: An answer that would exceed 1 MiB is replaced by a refusal naming control_message_bytes
    Given two sandboxes whose labels together hold more than 1 MiB
    When I list the sandboxes carrying their shared label
    Then the listing is refused as exceeding the limit control_message_bytes of 1048576 bytes

  # Version 2 hosts keep the retained copy themselves; a provider that keeps one too must bound it.
  @id:v2-limit-retention @req:SDP2-S48 @must
  Scenario: A retained output limit above 16 MiB is refused, or never retains more than 16 MiB
    Given a sandbox
    When I stream a command writing 16 MiB and 1 KiB, asking to retain 16 MiB and 1 byte
    Then either that was refused as exceeding the limit retained_output_bytes, or the provider retained at most 16 MiB

  @id:v2-limit-fixed-stdin @req:SDP2-S31 @cap:exec.stdin @must
  Scenario Outline: Fixed input is collected up to 16 MiB, and refused past it naming buffered_value_bytes (<size>)
    Given a sandbox
    And the provider takes a command's input whole rather than streamed
    When I run `wc -c` with <size> of zero bytes as its stdin
    Then <outcome>

    Examples:
      | size               | outcome                                                                       |
      | 16 MiB             | stdout is exactly "16777216\n"                                                |
      | 16 MiB and 1 byte  | the command is refused as exceeding the limit buffered_value_bytes of 16777216 bytes |

  @id:v2-shutdown-while-running @req:SDP2-139 @req:SDP2-096 @must
  Scenario: Asked to shut down while a streamed command runs, the provider answers and exits within the shutdown timeout
    Given a freshly started provider that has been initialized
    When a streamed command that sleeps for 30 seconds is running on that provider
    And the host asks the provider to shut down
    Then the provider answered the shutdown
    And the provider process exits within 7 seconds

  # The command's process is watched on this host, so this needs a provider whose commands run here
  # (isolation none); the 3 s leave time for the process to be seen gone, not for it to finish.
  @id:v2-shutdown-cancels-commands @req:SDP2-139 @must
  Scenario: Asked to shut down while a streamed command runs, the provider cancels the command rather than leaving it running
    Given a freshly started provider that has been initialized
    When a streamed command that prints its process id, then sleeps for 30 seconds, is running on that provider
    And the host asks the provider to shut down
    Then the provider answered the shutdown
    And the provider process exits within 7 seconds
    And the command's process has ended within 3 seconds of the provider's exit
