Feature: Sandbox lifecycle
  A sandbox is created from a spec, described by id, and deleted. The handle a create returns holds
  everything needed to operate the sandbox without asking again: its status, its own capability
  declaration and its working directory.

  @id:create-describe-delete @req:SDP1-050 @must
  Scenario: A sandbox can be created, described and deleted
    Given a provider
    When I create a sandbox
    And I describe the sandbox
    Then the description names the same sandbox
    And the description reports a known sandbox state
    When I delete the sandbox
    Then the delete succeeds

  @id:handle-info @req:SDP1-050 @req:SDP1-021 @must
  Scenario: A new sandbox's handle carries everything needed to operate it
    Given a provider
    When I create a sandbox
    Then the handle carries the sandbox's status, with its id and state
    And the handle carries the sandbox's own capability declaration
    And the handle names a non-empty working directory

  @id:sandbox-id-rules @req:SDP1-038 @must
  Scenario: Sandbox ids are non-empty, at most 256 bytes, with no whitespace or control characters
    Given a provider
    When I create a sandbox
    Then the sandbox id is non-empty, at most 256 bytes, without whitespace or control characters

  @id:describe-after-delete @req:SDP1-S05 @must
  Scenario: A deleted sandbox is reported gone
    Given a sandbox
    When I delete the sandbox
    And I describe the sandbox
    Then the sandbox is reported not found, or in state deleting or deleted
