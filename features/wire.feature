Feature: The wire: framing, envelope and concurrency
  A provider speaks JSON-RPC 2.0 over its standard input and output, one message per line. Its
  stdout carries protocol messages and nothing else. It answers every request under the request's
  own id, however many are in flight, and a quick request never waits behind a slow one. It never
  answers a notification, a blank line, or a batch with an array.

  @id:wire-stdout-purity @req:SDP1-001 @req:SDP1-002 @req:SDP1-003 @req:SDP1-008 @must
  Scenario: Everything the provider writes on stdout is one JSON-RPC 2.0 message per line
    Given a freshly started provider
    When the host takes it through a representative session
    Then every line the provider wrote on stdout was a single JSON object
    And every message the provider wrote declares JSON-RPC version 2.0

  # v1 sends exec/output, logs/output, host/event and host/log; v2 host/event, host/log and host/event_failed,
  # its output riding data channels instead.
  @id:wire-notification-methods @req:SDP1-012 @req:SDP2-012 @must
  Scenario: The provider sends no notifications other than those its protocol version defines
    Given a freshly started provider
    When the host takes it through a representative session
    Then the only notifications the provider sent were those its protocol version defines

  @id:wire-no-host-log @req:SDP1-121 @should
  Scenario: The provider writes its logs to stderr instead of sending host/log notifications
    Given a freshly started provider
    When the host takes it through a representative session
    Then the provider sent no host/log notification

  @id:wire-snake-case-fields @req:SDP1-033 @must
  Scenario: Every field name the provider writes is snake_case
    Given a freshly started provider
    When the host takes it through a representative session
    Then every field name in the provider's messages was snake_case, leaving aside the keys of labels, env, headers and provider config

  @id:wire-blank-lines-ignored @req:SDP1-004 @must
  Scenario: Blank and whitespace-only lines from the host are skipped without an answer
    Given a freshly started provider that has been initialized
    When the host sends blank and whitespace-only lines followed by a request
    Then the provider answered that request and nothing else

  @id:wire-pipelined-requests @req:SDP1-005 @req:SDP1-006 @must @dialect:sandbox-driver-v1
  Scenario: Requests sent together, without waiting for answers, are each answered under their own id
    Given a freshly started provider that has been initialized
    And a sandbox created through that provider
    When the host sends 12 requests in a single write, without waiting for any answer
    Then every one of those requests was answered exactly once, under its own id
    And each answer fits its own request

  @id:wire-large-answers-whole @req:SDP1-002 @req:SDP1-003 @req:SDP1-005 @req:SKETCH-013 @must
  Scenario: Large answers to requests sent at once each arrive whole, one message per line
    Given a sandbox
    When I write a file of 512 KiB of patterned bytes into the sandbox
    And I read that file 8 times at once
    Then every read returned the whole file

  @id:wire-no-head-of-line-blocking @req:SDP1-007 @req:SDP1-006 @must
  Scenario: A quick request is answered while a slow streamed command is still running
    Given a sandbox
    When I start a streamed command that runs for about 3 seconds
    And I describe the sandbox while that command is still running
    Then the description came back while the command was still running, at least a second before the command's answer

  @id:wire-ids-echoed @req:SDP1-009 @req:SDP1-008 @must
  Scenario: Every answer repeats its request's id exactly, from 0 to beyond what a floating-point number holds
    Given a freshly started provider that has been initialized
    When the host sends requests with unsigned ids from 0 to the largest, two answered with a result and two with errors
    Then each of those requests was answered under exactly its own id
    And each of those answers declares JSON-RPC version 2.0

  @id:wire-no-batches @req:SDP1-010 @must
  Scenario: A batch is refused with a single error object, never answered with an array
    Given a freshly started provider that has been initialized
    When the host sends two requests together as one batch, followed by a request of its own
    Then the batch was refused with a single error object, not an array
    And neither request inside the batch was answered on its own

  @id:wire-notifications-unanswered @req:SDP1-011 @must
  Scenario: Notifications from the host, requests without an id, are never answered
    Given a freshly started provider that has been initialized
    When the host sends notifications followed by a request
    Then the provider answered that request and nothing else
