Feature: Handshake and envelope
  The host opens every session with initialize. The provider answers with its protocol version,
  its identity and its capabilities; refuses a protocol version it does not speak in words a person
  can read; and answers requests it cannot accept with the right JSON-RPC error instead of going
  silent or crashing.

  @id:handshake-identity @req:SKETCH-001 @req:SDP1-016 @req:SDP1-018 @must
  Scenario: The initialize answer names the protocol, the provider and its capabilities
    Given a freshly started provider
    When the host initializes it
    Then the answer follows the protocol's schema
    And the answer names the protocol version the host speaks
    And the answer names the provider kind and version
    And the provider kind is lowercase letters, digits and inner hyphens, at most 64 bytes
    And the answer carries a capability declaration

  @id:handshake-version-mismatch @req:SDP1-017 @must
  Scenario: A protocol version the provider does not speak is refused by name
    Given a freshly started provider
    When the host initializes it asking for protocol version 99
    Then the handshake is refused with an application error
    And the refusal message names version 99 and the provider's own version

  # The versions next to version 1: the v2 counterpart would ask for 1 and 3, so this stays a v1 scenario.
  @id:handshake-version-boundaries @req:SDP1-017 @must @dialect:sandbox-driver-v1
  Scenario Outline: The versions next to the provider's own are refused by name too
    Given a freshly started provider
    When the host initializes it asking for protocol version <version>
    Then the handshake is refused with an application error
    And the refusal message names version <version> and the provider's own version

    Examples:
      | version |
      | 0       |
      | 2       |

  @id:initialize-unknown-fields @req:SDP1-034 @must
  Scenario: An initialize carrying a field the provider does not know is answered as usual
    Given a freshly started provider
    When the host initializes it with an extra field the provider does not know
    Then the provider answered that initialize with its own protocol version

  @id:unknown-method @req:SKETCH-003 @req:SDP1-014 @must
  Scenario: A request for a method that does not exist is answered "method not found"
    Given a freshly started provider that has been initialized
    When the host calls the method "conformance/no-such-method"
    Then the answer is the JSON-RPC error -32601 "method not found"

  @id:malformed-line @req:SKETCH-008 @req:SDP1-042 @must
  Scenario: A line that is not JSON is answered "invalid request", and the provider keeps serving
    Given a freshly started provider that has been initialized
    When the host sends a line that is not JSON
    Then the answer is the JSON-RPC error -32600 "invalid request"
    And the provider still answers requests

  @id:capabilities-complete @req:SDP1-022 @must @dialect:sandbox-driver-v1
  Scenario: The capability declaration has every group and every flag, each of the right type
    Given a provider
    Then the provider's capability declaration has every group: isolation, lifecycle, exec, fs, search, git, services, pty, logs, access, network, snapshots and volumes
    And its isolation is none, container or vm
    And its pty, logs, snapshots and volumes groups are each null or an object
    And every flag of every group it declares is present and a boolean

  @id:capabilities-stable @req:SDP1-020 @must
  Scenario: Initializing a second time returns exactly the same capabilities
    Given a freshly started provider that has been initialized
    When the host initializes it again
    Then the capabilities are exactly those of the first answer

  @id:access-vpn-false @req:SDP1-026 @must
  Scenario: The retired access.vpn flag is always false
    Given a sandbox
    Then access.vpn is false in the provider's declaration and in the sandbox's own

  @id:snapshot-kind-flags-consistent @req:SDP1-027 @must @cap:snapshots
  Scenario: A snapshot kind flag that is true implies its overall flag
    Given a provider
    Then whenever a from_image_kinds flag is true, from_image is true, and whenever a from_dockerfile_kinds flag is true, from_dockerfile is true
