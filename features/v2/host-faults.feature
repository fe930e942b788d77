@dialect:sandbox-driver-v2
Feature: Version 2 data channels: what the provider refuses from the host
  A provider reads the host's frames as strictly as the host reads its own: a frame of a kind that does not
  belong on the channel fails the operation and never becomes data; a frame longer than the limit is
  refused from its header; a channel the host closes before its end of file is an incomplete transfer, not
  a success; and an acknowledgement that never comes ends the operation as a transport failure once the
  open timeout has passed, never in data and never in a hang.

  Background:
    Given a sandbox

  @id:v2-fault-unexpected-kind @req:SDP2-132 @must
  Scenario Outline: A frame of kind <kind> from the host on a file write fails the write and never becomes content
    When I write generated text to "faults/unexpected.txt", the host first sending a frame of kind <kind> on the channel
    Then the write failed
    And "faults/unexpected.txt" does not hold the bytes of that frame

    Examples:
      | kind                       |
      | stdout                     |
      | stderr                     |
      | open                       |
      | undefined                  |

  @id:v2-fault-oversized-frame @req:SDP2-131 @must
  Scenario: A frame from the host longer than 65,536 bytes fails the write
    When I write generated text to "faults/oversized.txt", the host first sending a frame of 65,537 bytes
    Then the write failed
    And "faults/oversized.txt" does not hold the bytes of that frame

  # Readers stop at the end of file, so bytes after it may go unread: what matters is that they never arrive.
  @id:v2-fault-data-after-eof @req:SDP2-131 @req:SDP2-132 @must
  Scenario: Bytes the host sends after its end of file never reach the file
    When I write generated text to "faults/after-eof.txt", the host sending more bytes after its end of file
    Then either the write failed, or "faults/after-eof.txt" holds exactly the text sent before the end of file

  @id:v2-fault-close-before-eof @req:SDP2-S49 @must
  Scenario: A write whose channel the host closes before its end of file fails
    When I write generated text to "faults/cut-short.txt", the host closing the channel without an end of file
    Then the write failed

  # Waits out the protocol's 10-second open timeout.
  @id:v2-fault-ack-withheld @req:SDP2-S50 @req:SDP2-133 @must
  Scenario: An acknowledgement that never comes ends the read as a transport failure within the open timeout
    Given a file "faults/unacknowledged.txt" holding generated text
    When I read "faults/unacknowledged.txt", the host never acknowledging the channel's open
    Then the read failed with the error kind transport within 15 seconds
    And no data frame arrived on that channel
