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

  # One sandbox per process: a delete names the sandbox it means, and a plugin that ignores the id would
  # delete the wrong one. The sketch's exec names no sandbox ({args, timeout_secs}, as the forkd plugin
  # takes it): a one-sandbox process runs every command in its sandbox, which the sketch allows.
  @id:sketch-foreign-id @req:SKETCH-014 @must @dialect:fabro-sketch
  Scenario: A plugin that owns a sandbox deletes only the sandbox a delete names
    Given a sandbox
    When I delete a never-issued sandbox id, on the provider that serves the sandbox
    Then the sandbox still runs commands
