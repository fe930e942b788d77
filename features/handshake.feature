Feature: Handshake and envelope
  The host opens every session with initialize. The provider answers with its protocol version,
  its identity and its capabilities; refuses a protocol version it does not speak in words a person
  can read; and answers requests it cannot accept with the right JSON-RPC error instead of going
  silent or crashing.

  @id:handshake-identity @req:SDP1-016 @req:SDP1-018 @must
  Scenario: The initialize answer names the protocol, the provider and its capabilities
    Given a freshly started provider
    When the host initializes it
    Then the answer follows the protocol's schema
    And the answer names protocol version 1
    And the answer names the provider kind and version
    And the provider kind is lowercase letters, digits and inner hyphens, at most 64 bytes
    And the answer carries a capability declaration

  @id:handshake-version-mismatch @req:SDP1-017 @must @dialect:sandbox-driver-v1
  Scenario: A protocol version the provider does not speak is refused by name
    Given a freshly started provider
    When the host initializes it asking for protocol version 99
    Then the handshake is refused with an application error
    And the refusal message names version 99 and the provider's own version 1

  @id:unknown-method @req:SDP1-014 @must
  Scenario: A request for a method that does not exist is answered "method not found"
    Given a freshly started provider that has been initialized
    When the host calls the method "conformance/no-such-method"
    Then the answer is the JSON-RPC error -32601 "method not found"

  @id:malformed-line @req:SDP1-042 @must
  Scenario: A line that is not JSON is answered "invalid request", and the provider keeps serving
    Given a freshly started provider that has been initialized
    When the host sends a line that is not JSON
    Then the answer is the JSON-RPC error -32600 "invalid request"
    And the provider still answers requests
