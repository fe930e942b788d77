@dialect:sandbox-driver-v2
Feature: Version 2 removed the methods that carried bytes in control messages
  Version 2 moves every byte off the control connection, so the version 1 methods that carried bytes as
  base64, and the buffered run that returned them, are gone. A version 2 provider answers each of them as
  a method it does not have: never by running it, and never with an application error that suggests it
  exists but failed.

  @id:v2-removed-method @req:SDP2-068 @must
  Scenario Outline: The version 1 method <method> is answered "method not found"
    Given a sandbox
    When the host makes the version 1 call <method>
    Then the answer is the JSON-RPC error -32601 "method not found"

    Examples:
      | method                 |
      | exec/run               |
      | exec/cancel            |
      | exec/stdio_input       |
      | exec/stdio_output      |
      | exec/stdio_close_input |
      | pty/input              |
      | pty/output             |
