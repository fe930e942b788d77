Feature: The fabro provider-plugin sketch
  Plugins written to the early fabro sketch (the forkd plugin among them) refuse whatever they do not
  offer with code -32001 and one fixed sentence, "this sandbox provider does not support it", so a
  host can tell "not offered" from "broken" without a capability name.

  @id:sketch-unsupported-sentence @req:SKETCH-002 @must @dialect:fabro-sketch
  Scenario Outline: An undeclared operation is refused with -32001 and the sketch's sentence
    Given a sandbox
    When I ask the provider to <operation>
    Then unless <capability> is declared, the refusal has code -32001 and says "this sandbox provider does not support it"

    Examples:
      | operation                 | capability          |
      | stream a command's output | exec.streaming      |
      | read a file natively      | fs.native           |
      | write a file natively     | fs.native           |
      | list a directory natively | fs.native           |
      | grep files                | grep                |
      | glob for files            | glob                |
      | get a preview url         | access.preview_urls |
      | set auto-stop             | lifecycle.autoStop  |

  # One sandbox per process: a call the host sends to a plugin names the sandbox it means, and a plugin
  # that ignores the id would run one sandbox's commands in another's, or delete the wrong one.
  @id:sketch-foreign-id @req:SKETCH-014 @must @dialect:fabro-sketch
  Scenario: A plugin that owns a sandbox acts only on the sandbox a call names
    Given a sandbox
    When I run a command naming a never-issued sandbox id, on the provider that serves the sandbox
    Then that command was refused, not run in the sandbox
    When I delete a never-issued sandbox id, on the provider that serves the sandbox
    Then the sandbox still runs commands
