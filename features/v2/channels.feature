@dialect:sandbox-driver-v2
Feature: Version 2 data channels: what the provider sends on them
  Every byte a version 2 operation moves travels on a data channel of its own: the provider connects to
  the host's socket, names the channel and its token in an open frame, sends its bytes in frames of at
  most 65,536 bytes, and ends with exactly one end of file, before it answers the operation. When the host
  offers to acknowledge opens, the provider asks for the acknowledgement and sends nothing before it; when
  the host does not, the provider does not wait for one.

  Each rule holds whether or not the host acknowledges opens, and for bytes flowing either way: a command's
  output (both of its streams) and a file read come from the provider, a file write goes to it.

  @id:v2-channel-open-first @req:SDP2-130 @must
  Scenario Outline: Every data channel starts with an open frame naming exactly its channel and token (acknowledgements <acknowledgements>)
    Given a freshly started provider, initialized with open acknowledgements <acknowledgements>
    When the host moves bytes through it both ways
    Then every data channel was opened, with an open frame naming exactly its request's channel and token
    And no other connection reached the host's data socket

    Examples:
      | acknowledgements |
      | offered          |
      | not offered      |

  @id:v2-channel-eof-before-answer @req:SDP2-129 @must
  Scenario Outline: The provider ends its side of a channel before it answers the operation (acknowledgements <acknowledgements>)
    Given a freshly started provider, initialized with open acknowledgements <acknowledgements>
    When the host moves bytes through it both ways
    Then on every data channel the provider's end of file was on the wire before the operation's answer

    Examples:
      | acknowledgements |
      | offered          |
      | not offered      |

  @id:v2-channel-frame-limit @req:SDP2-131 @must
  Scenario Outline: Large output is split into frames of at most 65,536 bytes (acknowledgements <acknowledgements>)
    Given a freshly started provider, initialized with open acknowledgements <acknowledgements>
    When the host moves bytes through it both ways
    Then no frame the provider sent carried more than 65,536 bytes
    And the frames carried every byte: 200 KB on each of the command's outputs and 300 KB of the file read

    Examples:
      | acknowledgements |
      | offered          |
      | not offered      |

  @id:v2-channel-one-eof @req:SDP2-131 @req:SDP2-S27 @must
  Scenario Outline: The provider sends exactly one empty end of file per channel, and nothing after it (acknowledgements <acknowledgements>)
    Given a freshly started provider, initialized with open acknowledgements <acknowledgements>
    When the host moves bytes through it both ways
    Then every data channel carried exactly one end of file from the provider, empty, and no frame after it

    Examples:
      | acknowledgements |
      | offered          |
      | not offered      |

  @id:v2-channel-known-kinds @req:SDP2-S26 @must
  Scenario Outline: The provider sends only open, stdout, stderr and end of file frames (acknowledgements <acknowledgements>)
    Given a freshly started provider, initialized with open acknowledgements <acknowledgements>
    When the host moves bytes through it both ways
    Then every frame the provider sent was an open, a stdout, a stderr or an end of file frame

    Examples:
      | acknowledgements |
      | offered          |
      | not offered      |

  @id:v2-channel-waits-for-ack @req:SDP2-133 @must
  Scenario: Offered acknowledgements, the provider asks for one and sends nothing before it, however late it comes
    Given a freshly started provider, initialized with open acknowledgements offered
    When the host moves bytes through it both ways, acknowledging every open half a second late
    Then every data channel's open asked for the host's acknowledgement
    And no data frame arrived on any channel before the host's acknowledgement of it

  @id:v2-channel-no-ack-unoffered @req:SDP2-S30 @must
  Scenario: Not offered acknowledgements, the provider neither asks for one nor waits for one
    Given a freshly started provider, initialized with open acknowledgements not offered
    When the host moves bytes through it both ways
    Then no data channel's open asked for an acknowledgement
    And every one of those operations was answered within 5 seconds
