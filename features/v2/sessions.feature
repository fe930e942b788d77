@dialect:sandbox-driver-v2
Feature: Version 2 stdio processes and terminals: one data channel each, for their whole life
  A version 2 stdio process or terminal lives on the data channel of its open: the host's stdin frames are
  its input and the host's end of file closes that input; its output comes back as frames, and the
  provider's end of file when the output ends. Waiting for a process, or closing a terminal, ends the
  channel. A call naming a process or terminal id that is not open is refused, naming the id's field;
  closing a terminal that is not open, or cancelling a stream no follow uses, is a success that changes
  nothing.

  @id:v2-stdio-one-channel @req:SDP2-S35 @must @cap:exec.stdio_process
  Scenario: A stdio process's input and output ride the one channel of its open, and the host's end of file ends its input
    Given a sandbox
    When I open a stdio process running `cat; printf 'saw the end of its input'`
    And I send a generated line to the process
    Then the process echoes that line
    When I close the process's input
    Then the process's output goes on with "saw the end of its input", then ends
    And waiting for the process reports termination exited with exit code 0
    And the process used one data channel, that of its open, which carried its output as stdout frames and ended with one end of file

  @id:v2-pty-one-channel @req:SDP2-S35 @must @cap:pty
  Scenario: A terminal's keystrokes and output ride the one channel of its open, which its close ends
    Given a sandbox
    When I open a terminal of 24 rows and 80 columns
    And I type `printf 'typed through the channel\n'` into the terminal
    Then the terminal shows "typed through the channel"
    When I close the terminal
    Then the terminal used one data channel, that of its open, which the provider ended with one end of file when the terminal closed

  @id:v2-stdio-unknown-id @req:SDP2-S22 @must @cap:exec.stdio_process
  Scenario: Terminating or waiting for a stdio process id that was never opened is refused as invalid_spec naming process_id
    Given a sandbox
    Then terminating and waiting for a process id never opened are each refused as invalid_spec naming process_id

  @id:v2-pty-unknown-id @req:SDP2-S22 @must @cap:pty @cap:pty.resize
  Scenario: Resizing a terminal id that was never opened is refused as invalid_spec naming pty_id
    Given a sandbox
    Then resizing a terminal id never opened is refused as invalid_spec naming pty_id

  @id:v2-pty-close-unknown @req:SDP2-S21 @should @cap:pty
  Scenario: Closing a terminal id that is not open succeeds
    Given a sandbox
    Then closing a terminal id that was never opened succeeds

  @id:v2-stream-cancel-unused @req:SDP2-S21 @should
  Scenario: Cancelling a stream id that no follow uses succeeds
    Given a sandbox
    When I cancel a stream id that no follow uses yet
    Then the cancel succeeds
