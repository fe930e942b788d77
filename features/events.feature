Feature: Control-plane events
  An operation that asks for events (a route id, and optionally a correlation id) gets host/event
  notifications about itself: operation_started, then exactly one operation_completed or
  operation_failed, all sharing one operation id, the last of them written before the operation's
  answer. Events are numbered per source from 1 without gaps and delivered in order; the route id
  and the correlation id come back exactly as they were given, whatever they look like, and a request
  that gives no correlation id gets events carrying none. Every event is dated by the wall clock when it
  was observed. Operations that did not ask get no events, and command output never travels in the event
  feed.

  Background:
    Given a freshly started provider that has been initialized

  @id:events-operation-pair @req:SDP1-111 @req:SDP1-114 @must
  Scenario Outline: An operation that asks for events reports its start and exactly one end
    When I <operation> asking for events
    Then the operation emitted operation_started and exactly one terminal event, all sharing one operation id
    And its terminal event is operation_completed
    And every event of it names the provider's kind, and those on its own route carry its own correlation id

    Examples:
      | operation              |
      | create a sandbox       |
      | attach to a sandbox    |
      | delete a sandbox       |
      | undelete a sandbox     |
      | delete a snapshot      |

  @id:events-failed-operation @req:SDP1-114 @must
  Scenario: An operation that fails after reporting its start reports exactly one operation_failed
    When I attach to a never-issued sandbox id asking for events
    Then the attach is refused, and any events it emitted are operation_started and exactly one operation_failed, sharing one operation id
    And any operation_failed it emitted arrived before the refusal

  # events-failed-operation asks it of an attach; every operation that takes an events route can be refused.
  @id:events-refused-operation @req:SDP1-114 @must
  Scenario Outline: A refused request to <operation> reports no events, or its start and exactly one operation_failed
    When I <operation> asking for events, which the provider refuses
    Then any events the refused operation emitted are operation_started and exactly one operation_failed, sharing one operation id

    Examples:
      | operation                                         |
      | create a sandbox whose working directory is empty |
      | undelete a sandbox id that was never issued       |
      | snapshot a sandbox id that was never issued       |

  @id:events-repeated-delete @req:SDP1-114 @req:SDP1-059 @must
  Scenario: Deleting an already-deleted sandbox, asking for events, reports its start and end as the first delete did
    When I create a sandbox asking for events
    And I delete the sandbox asking for events
    And I delete the sandbox again asking for events
    Then the repeated delete reported its start and exactly one end wherever the first delete reported its own

  @id:events-actions-truthful @req:SDP1-111 @req:SDP1-114 @must @cap:lifecycle.archive
  Scenario: Events reported on a sandbox's route name the operations that were performed, and no others
    When I create a sandbox asking for events
    And I archive that sandbox and start it again
    Then every event on the create's route names create, archive or start as its action

  @id:events-actions-pause-resume @req:SDP1-111 @req:SDP1-114 @must @cap:lifecycle.pause
  Scenario: Events of a pause and a resume name pause and resume, and nothing else
    When I create a sandbox asking for events
    And I pause that sandbox and resume it
    Then every event on the create's route names create, pause or resume as its action

  @id:events-snapshot-subject @req:SDP1-111 @must @cap:snapshots @cap:snapshots.filesystem
  Scenario: The events of a snapshot's creation are about the snapshot
    When I create a snapshot of a sandbox asking for events
    Then the snapshot's terminal event names the snapshot by the id the provider assigned

  @id:events-terminal-before-answer @req:SDP1-115 @must
  Scenario: An operation's final event is written before its answer
    When I create a sandbox asking for events
    And I attach to the sandbox asking for events
    And I delete the sandbox asking for events
    Then each operation's terminal event arrived before its answer

  # Operations that do not ask for events get none, so they use up no numbers either: what a source
  # numbers is what it sends.
  @id:events-sequence @req:SDP1-113 @must
  Scenario: A new event source numbers its events from 1, up by exactly one, whatever operations ran between
    When I create a sandbox asking for events
    And I create and delete another sandbox without asking for events
    And I attach to the sandbox asking for events
    And I delete the sandbox asking for events
    Then the events of each source are numbered from 1, up by exactly one per event

  # A handle's later operations (stop, start) may be reported on the route of its create (early v1) or not
  # at all; however they are reported, each is an operation of its own, with an operation id of its own.
  @id:events-operation-ids-distinct @req:SDP1-114 @must
  Scenario: Every operation has an operation id of its own, even when several are reported on one route
    When I create a sandbox asking for events
    And I stop that sandbox and start it again
    And I delete the sandbox asking for events
    Then each operation id belongs to exactly one operation: one operation_started and one terminal event

  # Early v1 reports a handle's later operations on the route of that handle's create; a route is never shared
  # by two handles because one was opened after the other.
  @id:events-route-per-handle @req:SDP1-118 @req:SDP1-111 @must
  Scenario: A sandbox's later operations are never reported on the route of another sandbox's create
    When I create a sandbox asking for events
    And I create a second sandbox asking for events
    And I stop that sandbox and start it again
    Then no event on the second create's route is about the first sandbox

  @id:events-ordered @req:SDP1-117 @must
  Scenario: Events are delivered in order
    When I create a sandbox asking for events
    And I attach to the sandbox asking for events
    And I delete the sandbox asking for events
    Then the events arrived in the order of their sequence numbers, each operation's start before its end

  @id:events-ids-verbatim @req:SDP1-056 @req:SDP1-057 @req:SDP1-118 @must
  Scenario Outline: Route ids and correlation ids come back exactly as given, however they look
    When I create a sandbox asking for events with a <kind> route id and correlation id
    Then every event of the create carries that route id and that correlation id, exactly as given

    Examples:
      | kind               |
      | plain              |
      | padded             |
      | unicode            |
      | uri-like           |
      | json-looking       |
      | empty-correlation  |
      | absent-correlation |

  # v1 section 10: occurred_at is "the observation time", in the seconds-since-the-Unix-epoch form of section 6.
  # Timestamps are informational, so only a generous agreement with the host's clock is asked, and nothing
  # of their order.
  @id:events-dated-when-observed @req:SDP1-S25 @should
  Scenario: Every event is dated by the wall clock at the time it was observed
    When I create a sandbox asking for events
    And I delete the sandbox asking for events
    Then every event is dated by the wall clock, at about the time it arrived

  @id:events-create-names-id @req:SDP1-116 @must
  Scenario: The final event of a create names the sandbox by the id the provider assigned
    When I create a sandbox asking for events
    Then the create's terminal event names the sandbox by the id the provider assigned

  @id:events-only-when-asked @req:SDP1-111 @req:SDP1-112 @must
  Scenario: Only operations that ask get events, and command output never travels in them
    Given the host watches every message the provider sends
    When I create a sandbox asking for events
    And I run a command that prints a generated marker on both of its outputs, buffered and streamed
    And I create and delete another sandbox without asking for events
    Then no event carries the command's output
    And every event the provider sent belongs to the one create that asked for events
