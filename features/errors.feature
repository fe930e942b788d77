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

  # -- one rule, every call that can break it ---------------------------------------------------------
  # A rule checked on one method and not on the others that produce it is the gap a blind measurement found
  # most often. These outlines ask each error rule of every method of the protocol, one row per method;
  # tests/data/rule_coverage.yaml lists which row (or which other scenario) covers each method and
  # tests/test_rule_coverage.py keeps that list complete as methods are added to the schemas.

  # Only the methods a request cannot mean anything without: every field each one requires is left out. The
  # list methods are left to invalid-params, since a missing filter has an obvious reading (no filter).
  @id:invalid-params-every-method @req:SDP1-042 @must @dialect:sandbox-driver-v1 @dialect:sandbox-driver-v2
  Scenario Outline: A request to "<call>" that gives none of the params it requires is answered "invalid request"
    Given a freshly started provider that has been initialized
    When the host asks to "<call>" with none of the params it requires
    Then the answer is the JSON-RPC error -32600 "invalid request", or an unsupported refusal where <capability> is not declared
    And the provider still answers requests

    Examples:
      | call                            | capability                 |
      | create a sandbox                | a core method              |
      | attach to a sandbox             | a core method              |
      | describe                        | a core method              |
      | read a sandbox's platform       | a core method              |
      | start a sandbox                 | a core method              |
      | stop a sandbox                  | a core method              |
      | delete a sandbox                | a core method              |
      | pause                           | lifecycle.pause            |
      | resume                          | lifecycle.pause            |
      | archive                         | lifecycle.archive          |
      | recover                         | lifecycle.recover          |
      | refresh activity                | lifecycle.refresh_activity |
      | undelete                        | lifecycle.undelete         |
      | fork                            | lifecycle.fork             |
      | resize                          | lifecycle.resize           |
      | snapshot                        | lifecycle.snapshot_sandbox |
      | set timers                      | lifecycle.timers           |
      | set labels                      | lifecycle.labels           |
      | update network                  | lifecycle.update_network   |
      | run a command                   | a core method              |
      | stream a command                | a core method              |
      | cancel a command                | exec.cancel                |
      | open a stdio process            | exec.stdio_process         |
      | write to a stdio process        | exec.stdio_process         |
      | close a stdio process's input   | exec.stdio_process         |
      | read a stdio process's output   | exec.stdio_process         |
      | terminate a stdio process       | exec.stdio_process         |
      | wait for a stdio process        | exec.stdio_process         |
      | open a terminal                 | pty                        |
      | write to a terminal             | pty                        |
      | read a terminal                 | pty                        |
      | resize a terminal               | pty.resize                 |
      | close a terminal                | pty                        |
      | follow logs                     | logs                       |
      | cancel a stream                 | a core method              |
      | read a file                     | a core method              |
      | write a file                    | a core method              |
      | ask whether a path exists       | a core method              |
      | read a path's metadata          | a core method              |
      | list a directory                | a core method              |
      | create a directory              | a core method              |
      | rename a path                   | a core method              |
      | delete a path                   | a core method              |
      | set permissions                 | fs.permissions             |
      | create a snapshot               | snapshots                  |
      | get a snapshot                  | snapshots                  |
      | delete a snapshot               | snapshots                  |
      | activate a snapshot             | snapshots.activation       |
      | deactivate a snapshot           | snapshots.activation       |
      | follow a snapshot's build logs  | snapshots.build_logs       |
      | create a volume                 | volumes                    |
      | get a volume                    | volumes                    |
      | delete a volume                 | volumes                    |
      | get a preview url               | access.preview_urls        |
      | get a signed preview url        | access.preview_urls.signed |
      | create ssh access               | access.ssh                 |
      | revoke ssh access               | access.ssh.revoke          |
      | open a web terminal             | access.web_terminal        |
      | open a vnc connection           | access.vnc                 |
      | get the sandbox's environment   | exec.environment           |
      | release a preview url           | access.preview_urls        |
      | clone a repository              | git.native                 |
      | run a one-shot container        | one_shot                   |

  @id:unknown-sandbox-every-call @req:SDP1-S17 @req:SDP1-043 @req:SDP1-045 @req:SDP1-046 @must @dialect:sandbox-driver-v1 @dialect:sandbox-driver-v2
  Scenario Outline: "<call>" naming a sandbox id the provider never issued is refused as not_found, in a well-formed report
    Given a provider
    When I make the call "<call>" naming a sandbox id that was never issued
    Then the call is refused as not_found naming the sandbox and that id, or as unsupported where its capability is not declared
    And the answer is error -32000 with a report giving the kind, the message, whether it is retryable and the causes
    And the report lists at most 8 causes, each at most 500 bytes plus an ellipsis

    Examples: every call that names a sandbox
      | call                          |
      | describe a sandbox            |
      | attach to a sandbox           |
      | read a sandbox's platform     |
      | start a sandbox               |
      | stop a sandbox                |
      | run a command                 |
      | stream a command              |
      | read a file                   |
      | write a file                  |
      | ask whether a path exists     |
      | read a path's metadata        |
      | list a directory              |
      | create a directory            |
      | rename a path                 |
      | delete a path                 |
      | set permissions               |
      | open a stdio process          |
      | open a terminal               |
      | follow logs                   |
      | pause                         |
      | resume                        |
      | archive                       |
      | recover                       |
      | refresh activity              |
      | undelete                      |
      | fork                          |
      | resize                        |
      | snapshot                      |
      | set timers                    |
      | set labels                    |
      | update network                |
      | get a preview url             |
      | get a signed preview url      |
      | create ssh access             |
      | revoke ssh access             |
      | open a web terminal           |
      | open a vnc connection         |
      | get the sandbox's environment |
      | release a preview url         |
      | clone a repository            |
      | run a one-shot container      |

  @id:unknown-sandbox-not-retryable @req:SDP1-S20 @req:SDP2-S20 @should @dialect:sandbox-driver-v1 @dialect:sandbox-driver-v2
  Scenario Outline: "<call>" refused for naming a sandbox id never issued says retrying will not help
    Given a provider
    When I make the call "<call>" naming a sandbox id that was never issued
    Then the call was refused for that id, not as a call the provider does not make
    And the failure's report says retrying will not help

    Examples: every call that names a sandbox
      | call                          |
      | describe a sandbox            |
      | attach to a sandbox           |
      | read a sandbox's platform     |
      | start a sandbox               |
      | stop a sandbox                |
      | run a command                 |
      | stream a command              |
      | read a file                   |
      | write a file                  |
      | ask whether a path exists     |
      | read a path's metadata        |
      | list a directory              |
      | create a directory            |
      | rename a path                 |
      | delete a path                 |
      | set permissions               |
      | open a stdio process          |
      | open a terminal               |
      | follow logs                   |
      | pause                         |
      | resume                        |
      | archive                       |
      | recover                       |
      | refresh activity              |
      | undelete                      |
      | fork                          |
      | resize                        |
      | snapshot                      |
      | set timers                    |
      | set labels                    |
      | update network                |
      | get a preview url             |
      | get a signed preview url      |
      | create ssh access             |
      | revoke ssh access             |
      | open a web terminal           |
      | open a vnc connection         |
      | get the sandbox's environment |
      | release a preview url         |
      | clone a repository            |
      | run a one-shot container      |
