Feature: Errors, field encodings and tolerant reading
  A provider refuses a request it cannot decode as "invalid request" and reports an application
  failure as error -32000 with a typed report: a stable kind, the message, whether a retry may help,
  a short list of causes, and the kind's own detail fields. A command's output never leaks into an
  error's text. Durations and timestamps keep their encodings, and a provider reads generously:
  fields it does not know are ignored, and requests written in the shapes of the protocol's launch
  still work.

  @id:invalid-params @req:SDP1-042 @must @dialect:sandbox-driver-v1
  Scenario Outline: A request whose params lack a required field is answered "invalid request"
    Given a freshly started provider that has been initialized
    When the host asks to <request> without giving its <field>
    Then the answer is the JSON-RPC error -32600 "invalid request", unless the provider may read the gap as <a lenient reading>
    And the provider still answers requests

    # Only a field without which the request means nothing must be refused. A missing list filter has
    # an obvious reading (no filter); upstream's reference refuses it, a lenient reader may list everything.
    Examples:
      | request            | field            | a lenient reading |
      | describe a sandbox | sandbox id       | nothing at all    |
      | initialize         | protocol version | nothing at all    |
      | list sandboxes     | filter           | no filter         |

  @id:invalid-envelope @req:SDP1-042 @must @dialect:sandbox-driver-v1
  Scenario Outline: A message that is not a valid JSON-RPC 2.0 request is answered "invalid request"
    Given a freshly started provider that has been initialized
    When the host sends a request with <flaw>
    Then the answer is the JSON-RPC error -32600 "invalid request"
    And the provider still answers requests

    Examples:
      | flaw              |
      | no jsonrpc member |
      | a string id       |
      | a fractional id   |
      | a negative id     |
      | an integral float id |

  @id:application-error-report @req:SDP1-043 @req:SDP1-044 @req:SDP2-044 @req:SDP1-046 @must
  Scenario: An application failure is error -32000 with a typed report
    Given a provider
    When I describe a sandbox id that was never issued
    Then the answer is error -32000 with a report giving the kind, the message, whether it is retryable and the causes
    And the report's kind is one of the protocol's stable error kinds
    And the error's message is the report's message
    And the report lists at most 8 causes, each at most 500 bytes plus an ellipsis

  @id:error-retryable-by-kind @req:SDP1-S20 @should @dialect:sandbox-driver-v1
  Scenario: A failure that retrying cannot fix says it is not retryable
    Given a provider
    When I describe a sandbox id that was never issued
    Then the failure's kind is not_found
    And the failure's report says retrying will not help

  @id:error-retryable-unsupported @req:SDP1-S20 @should @dialect:sandbox-driver-v1
  Scenario: An operation refused as unsupported says retrying will not help
    Given a sandbox
    When I ask for an optional operation the sandbox does not declare
    Then it is refused as unsupported, in a report that says retrying will not help

  @id:error-retryable-invalid-state @req:SDP1-S20 @should @dialect:sandbox-driver-v1 @cap:lifecycle.stop
  Scenario: A command in a stopped sandbox either runs or is refused as not retryable
    Given a sandbox
    When I stop the sandbox and run a command in it
    Then the command ran, or was refused in a report that says retrying will not help

  @id:invalid-state-detail @req:SDP1-045 @must @dialect:sandbox-driver-v1 @cap:lifecycle.stop @cap:lifecycle.pause
  Scenario: A verb refused in the wrong state names the sandbox's actual state and an action of the protocol
    Given a sandbox
    When I stop the sandbox, then pause it and run a command in it
    Then each of those refused as invalid_state names stopped as the current state, and the pause names the action pause

  @id:not-found-detail @req:SDP1-045 @must @dialect:sandbox-driver-v1
  Scenario: A not_found failure names the kind of resource and its id in the error detail
    Given a provider
    When I describe a sandbox id that was never issued
    Then the failure's kind is not_found
    And the failure's detail names the resource "sandbox" and the id that was asked for

  @id:output-not-in-error-text @req:SDP1-047 @must @dialect:sandbox-driver-v1 @dialect:sandbox-driver-v2
  Scenario Outline: A command's output never appears in an error's message or report
    Given a sandbox
    When I run a command that writes a generated marker to stdout and stderr, then <ending>
    Then the provider reported a result, or an error whose message and report do not contain the marker

    Examples:
      | ending    |
      | fails     |
      | times out |

  @id:unknown-fields-ignored @req:SDP1-034 @req:SDP1-126 @must
  Scenario: Fields the provider does not know are ignored, in requests and inside specs
    Given a freshly started provider that has been initialized
    And a sandbox created through that provider
    When the host describes that sandbox, adding a field the protocol does not define
    Then the answer describes that sandbox
    When the host runs `printf tolerant` there, adding undefined fields beside the command's spec and inside it
    Then the command's answer is a result whose stdout is "tolerant"
    When the host creates another sandbox whose spec carries a field the protocol does not define
    Then that sandbox is created

  @id:list-filter-empty-or-null @req:SDP1-126 @req:SDP1-S16 @must @cap:lifecycle.labels
  Scenario: A list whose label filter is an empty map, or is null, lists every sandbox, unlabelled ones too
    Given a freshly started provider that has been initialized
    And a sandbox created through that provider, its labels then set to none
    When the host lists sandboxes with an empty label map, and again with the label map null
    Then both listings include that sandbox

  @id:launch-era-exec-spec @req:SDP1-126 @must
  Scenario: A command spec in the launch-era shape, only the command and its environment, still runs
    Given a freshly started provider that has been initialized
    And a sandbox created through that provider
    When the host runs `sleep 0.3; printf launched` there with a spec giving only the command and its environment
    Then the command's answer is a result whose stdout is "launched"

  @id:launch-era-file-read @req:SDP1-126 @must
  Scenario: A file read that gives neither offset nor length reads the whole file
    Given a freshly started provider that has been initialized
    And a sandbox created through that provider
    And a file in that sandbox with generated content
    When the host reads that file giving only the sandbox and the path
    Then the answer holds the file's whole content

  @id:duration-encodings @req:SDP1-036 @must
  Scenario: Durations are whole milliseconds in fields ending in _ms, and seconds plus nanoseconds inside events
    Given a provider
    When I create a sandbox whose events are routed to the suite
    And I run `printf timed`
    Then the command's duration is a whole number of milliseconds
    And every duration in the sandbox's events is whole seconds plus nanoseconds below one second

  @id:timestamp-encodings @req:SDP1-037 @req:SDP2-037 @must
  Scenario: A sandbox's timestamps are written in a form its protocol version defines
    # v1 (sections 6 and 10) writes a SystemTime in its structural form, seconds and nanoseconds since the
    # epoch; an RFC 3339 string is the form of v2-era writers, which upstream's v1 host cannot decode. v2
    # readers decode both, the string in UTC only.
    Given a sandbox
    When I describe the sandbox
    Then each timestamp in the description is absent or in a form its protocol version defines
    And no timestamp in the description lies in the future
