Feature: Deleting sandboxes
  Delete is idempotent: whatever the host knows about a sandbox, asking to delete it again, or
  deleting something already gone, succeeds. Hosts rely on this to clean up after crashes.

  @id:delete-unknown @req:SKETCH-006 @req:SDP1-059 @req:REST-003 @must
  Scenario: Deleting a sandbox id the provider never issued succeeds
    Given a provider
    When I delete a sandbox id that was never issued
    Then the delete succeeds

  @id:delete-twice @req:SKETCH-006 @req:SDP1-059 @req:REST-003 @must
  Scenario: Deleting a sandbox a second time succeeds
    Given a sandbox
    When I delete the sandbox
    And I delete the sandbox again
    Then both deletes succeed

  @id:delete-while-deleting @req:SDP1-059 @req:SKETCH-006 @req:REST-003 @must
  Scenario: Deleting a sandbox that is already being deleted succeeds
    Given a sandbox
    When I delete the sandbox twice at the same time
    Then both deletes succeed
