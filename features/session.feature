Feature: Provider health and the end of a session
  A host asks a provider how it is. An unhealthy provider still answers that question successfully,
  with a status that says what is wrong; an error would mean the check itself could not be made. A
  session ends when the host asks the provider to shut down, or closes its input: either way the
  provider exits promptly, so a host never has to kill it.

  @id:health-status @req:SDP1-093 @must
  Scenario: The provider reports its health as ok, unreachable, unauthorized or unknown
    Given a provider
    When I ask the provider for its health
    Then the health status is one of ok, unreachable, unauthorized or unknown

  @id:health-answered-even-when-unhealthy @req:SDP1-094 @must
  Scenario: Health is a successful answer, healthy or not: either ok, or a successful non-ok status
    Given a provider
    When I ask the provider for its health
    Then the provider answered with its health rather than an error, whatever the status

  @id:shutdown-then-exit @req:SDP1-096 @must @dialect:sandbox-driver-v1
  Scenario: Asked to shut down, the provider answers and then exits within 5 seconds
    Given a freshly started provider that has been initialized
    When the host asks the provider to shut down
    Then the provider answered the shutdown
    And the provider process exits within 5 seconds

  @id:shutdown-exit-status @req:SDP1-096 @should @dialect:sandbox-driver-v1
  Scenario: A provider that was asked to shut down, or whose input ended, exits with status 0
    Given a freshly started provider that has been initialized
    When the host asks the provider to shut down
    Then the provider answered the shutdown
    And the provider process exits with status 0 within 5 seconds

  @id:shutdown-while-running @req:SDP1-096 @must @dialect:sandbox-driver-v1
  Scenario: Asked to shut down while a command runs, the provider answers and exits within 5 seconds
    Given a freshly started provider that has been initialized
    When a command that sleeps for 30 seconds is running on that provider
    And the host asks the provider to shut down
    Then the provider answered the shutdown
    And the provider process exits within 5 seconds

  @id:shutdown-while-streaming @req:SDP1-096 @must @dialect:sandbox-driver-v1
  Scenario: Asked to shut down while a streamed command runs, the provider answers and exits within 5 seconds
    Given a freshly started provider that has been initialized
    When a streamed command that sleeps for 30 seconds is running on that provider
    And the host asks the provider to shut down
    Then the provider answered the shutdown
    And the provider process exits within 5 seconds

  @id:shutdown-while-interactive @req:SDP1-096 @must @dialect:sandbox-driver-v1 @cap:exec.stdio_process @cap:pty
  Scenario: Asked to shut down while a stdio process and a terminal are open, the provider answers and exits within 5 seconds
    Given a freshly started provider that has been initialized
    When a stdio process waiting for its input is open on that provider
    And a terminal is open on that provider
    And the host asks the provider to shut down
    Then the provider answered the shutdown
    And the provider process exits within 5 seconds

  @id:exit-on-input-closed @req:SDP1-097 @must
  Scenario: The provider exits within 5 seconds once its input is closed
    Given a freshly started provider that has been initialized
    When the host closes the provider's input
    Then the provider process exits within 5 seconds

  @id:exit-on-input-closed-status @req:SDP1-097 @should
  Scenario: A provider whose input ended exits with status 0
    Given a freshly started provider that has been initialized
    When the host closes the provider's input
    Then the provider process exits with status 0 within 5 seconds

  @id:exit-on-input-closed-while-running @req:SDP1-097 @must
  Scenario: The provider exits within 5 seconds once its input is closed, even while a command runs
    Given a freshly started provider that has been initialized
    When a command that sleeps for 30 seconds is running on that provider
    And the host closes the provider's input
    Then the provider process exits within 5 seconds

  @id:exit-on-input-closed-while-streaming @req:SDP1-097 @must
  Scenario: The provider exits within 5 seconds once its input is closed, even while a streamed command runs
    Given a freshly started provider that has been initialized
    When a streamed command that sleeps for 30 seconds is running on that provider
    And the host closes the provider's input
    Then the provider process exits within 5 seconds

  @id:exit-on-input-closed-while-stdio-process @req:SDP1-097 @must @cap:exec.stdio_process
  Scenario: The provider exits within 5 seconds once its input is closed, even while a stdio process waits for input
    Given a freshly started provider that has been initialized
    When a stdio process waiting for its input is open on that provider
    And the host closes the provider's input
    Then the provider process exits within 5 seconds

  @id:exit-on-input-closed-while-terminal @req:SDP1-097 @must @cap:pty
  Scenario: The provider exits within 5 seconds once its input is closed, even while a terminal is open
    Given a freshly started provider that has been initialized
    When a terminal is open on that provider
    And the host closes the provider's input
    Then the provider process exits within 5 seconds
