@dialect:sandbox-driver-v2
Feature: Version 2 command output: every byte on the channel, the provider's own accounting, and drains
  A version 2 provider sends every byte of a command's output on the command's data channel, whatever
  retained output limit the host asks for: a host that wants a copy keeps it itself, from those frames. The
  provider still accounts for each stream: what it kept plus what it left out is what it observed, and what
  it observed is every byte it sent. It says a stream was truncated only when bytes were lost beyond those
  counts, as when it gave up on a pipe that a leftover process holds open. A stop reaches a command from the
  moment its channel is open, and stays in force while its output drains after the main process exited; a
  hard stop never waits for a process that holds the output open.

  @id:v2-output-every-byte @req:SDP2-105 @req:SDP2-106 @req:SDP2-107 @must
  Scenario Outline: Every byte crosses the channel and the provider's counts add up (retained output limit: <limit>)
    Given a sandbox
    When I stream a command writing 300,000 bytes to stdout and 100,000 bytes to stderr, with retained output limit <limit>
    Then the channel carried all 300,000 stdout bytes and all 100,000 stderr bytes
    And for each stream, the provider counted every byte it sent as observed, and what it kept plus what it left out as what it observed
    And neither stream is said to be truncated

    Examples:
      | limit       |
      | none        |
      | 0 bytes     |
      | 4,096 bytes |

  @id:v2-drain-stop-in-force @req:SDP2-142 @must @cap:exec.stop
  Scenario: A hard stop while the output drains, after the main process exited, still ends what holds it open
    Given a sandbox
    When I start streaming a command that exits at once, leaving behind a process that keeps writing to its output, and that process has printed "ready"
    And the host stops it hard
    Then the command's call ended within 3 seconds of the stop
    And the leftover process is no longer running

  # Upstream gives up on the output 5 seconds after the kill at the latest.
  @id:v2-drain-kill-abandons @req:SDP2-142 @req:SDP2-107 @must @cap:exec.stop
  Scenario: A hard stop does not wait for a process outside the command's group that holds the output open, and says the output was cut short
    Given a sandbox
    And the sandbox can start a process in a session of its own, with setsid
    When I start streaming a command that starts a process in a session of its own holding the command's output open, then sleeps, and it has printed "ready"
    And the host stops it hard
    Then the command's call ended within 7 seconds of the stop, reported as killed or refused as an incomplete transfer
    And if that process still holds the output open, the answer says the output was truncated

  @id:v2-stop-at-channel-open @req:SDP2-S41 @must @cap:exec.stop
  Scenario: A hard stop sent the moment the command's channel opens takes effect, even before the command has started
    Given a sandbox created through a freshly started provider
    When I start streaming `sleep 30` through that provider and stop it hard as soon as its channel is open
    Then the command ended within 3 seconds, reported as killed

  @id:v2-stop-before-ack @req:SDP2-S41 @must @cap:exec.stop
  Scenario: A hard stop sent while the host still holds back the channel's acknowledgement takes effect when it comes
    Given a freshly started provider, initialized with open acknowledgements offered
    And a sandbox created through that provider
    When I start streaming `sleep 30` through that provider, acknowledging its channel's open 1 second late, and stop it hard before the acknowledgement
    Then the command ended within 4 seconds, reported as killed
