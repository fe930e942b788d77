Feature: REST providers
  A REST provider is reached over HTTP as its profile describes it (a built-in profile such as forkd,
  or a file given with --profile): which request creates a sandbox, runs a command, deletes it, and how
  each answer is read. These scenarios check what only HTTP can get wrong — statuses, the credential,
  error bodies — and that an HTTP answer never dresses an infrastructure failure or a timeout up as a
  command's exit code. The shared features run over REST unchanged.

  @id:rest-create-answers-id @req:REST-001 @must @dialect:rest
  Scenario: A create answers success with the new sandbox's id, and that id finds the sandbox
    Given a provider
    When I create a sandbox
    Then the sandbox id is non-empty, at most 256 bytes, without whitespace or control characters
    When I describe the sandbox
    Then the description names the same sandbox

  @id:rest-get-and-list @req:REST-008 @must @dialect:rest
  Scenario: A sandbox is found by get and by list while it exists, and by neither once it is deleted
    Given a sandbox
    When I list every sandbox
    Then the list includes the first sandbox
    When I delete the sandbox
    And I describe the sandbox
    Then the sandbox is reported not found, or in state deleting or deleted
    When I list every sandbox
    Then the list does not include the deleted sandbox

  @id:rest-describe-running @req:REST-013 @must @dialect:rest
  Scenario: A sandbox that runs commands is described as running, whether or not its answer names a state
    Given a sandbox
    When I run `printf ready`
    Then the command ran and exited with code 0
    And the sandbox is described as running

  @id:rest-exec-argv @req:REST-002 @must @dialect:rest
  Scenario: exec runs an argument vector and answers its stdout, its stderr and its exit code
    Given a sandbox
    When I run `printf 'answer:%s' "$((6 * 7))"; printf 'complaint' >&2; exit 5`
    Then the command ran and exited with code 5
    And stdout is exactly "answer:42"
    And stderr is exactly "complaint"

  @id:rest-delete-idempotent @req:REST-003 @must @dialect:rest
  Scenario: Deleting succeeds for a sandbox, again for the same sandbox, and for an id never issued
    Given a sandbox
    When I delete the sandbox
    And I delete the sandbox again
    Then both deletes succeed
    When I delete a sandbox id that was never issued
    Then the delete succeeds

  @id:rest-missing-credential @req:REST-004 @must @dialect:rest
  Scenario: A create without the credential is refused with 401 or 403, and creates nothing
    Given a provider
    When I note every sandbox the provider lists
    And I create a sandbox without credentials
    Then the request is refused with HTTP status 401 or 403
    And no sandbox was created by it

  @id:rest-wrong-credential @req:REST-005 @must @dialect:rest
  Scenario: A create with a wrong credential is refused with 401 or 403, and creates nothing
    Given a provider
    When I note every sandbox the provider lists
    And I create a sandbox with a wrong credential
    Then the request is refused with HTTP status 401 or 403
    And no sandbox was created by it

  @id:rest-near-miss-credential @req:REST-005 @must @dialect:rest
  Scenario Outline: A create with a token that is nearly the right one is refused with 401 or 403: <near miss>
    Given a provider
    When I note every sandbox the provider lists
    And I create a sandbox with a credential <near miss>
    Then the request is refused with HTTP status 401 or 403
    And no sandbox was created by it

    Examples:
      | near miss              |
      | one character short    |
      | one character too many |

  @id:rest-credential-every-route @req:REST-004 @must @dialect:rest
  Scenario: Listing, getting, running a command in and deleting a sandbox without the credential are refused
    Given a sandbox
    When I list, describe, run a command in and delete the sandbox without credentials
    Then each of those requests is refused with HTTP status 401 or 403
    And the sandbox still runs commands

  @id:rest-health-open @req:REST-009 @should @dialect:rest
  Scenario: The health endpoint answers without the credential
    Given a provider
    When I ask the provider for its health without credentials
    Then the health status is ok

  @id:rest-error-body @req:REST-010 @should @dialect:rest
  Scenario: An error answer says what went wrong in its body's error field
    Given a provider
    When I describe a sandbox id that was never issued
    Then the describe is refused as not_found
    And the answer's body says what went wrong in its error field

  @id:rest-exec-missing-sandbox @req:REST-006 @req:GAP-3 @must @dialect:rest
  Scenario: A command for a sandbox that does not exist is answered as missing, never with an exit code
    Given a sandbox
    When I run a command in a sandbox id that was never issued
    Then the provider answers an error, not an exit code
    And the error says the sandbox was not found
    When I delete the sandbox
    And I run a command in the deleted sandbox
    Then the provider answers an error, not an exit code
    And the error says the sandbox was not found

  @id:rest-exec-timeout @req:REST-007 @req:GAP-3 @must @dialect:rest
  Scenario: A command that outlives its timeout is stopped and answered as a timeout, promptly
    Given a sandbox
    When I run `sleep 20` with a timeout of 1 second
    Then the command timed out, without an exit code pretending to be the program's
    And the answer came within 10 seconds of the timeout
