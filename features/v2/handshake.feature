@dialect:sandbox-driver-v2
Feature: Version 2 handshake: the data transport
  A version 2 host announces, at initialize, the socket it listens on for data channels and the largest
  frame either side may send. A provider refuses an initialize that announces no data transport, and a
  frame limit other than the one the protocol fixes; a second initialize never moves it to another socket.
  Its capability declaration names the stop capability by its version 2 name.

  @id:v2-initialize-without-transport @req:SDP2-134 @must
  Scenario: An initialize that announces no data transport is refused as invalid params
    Given a freshly started provider
    When the host initializes it without announcing a data transport
    Then the answer is the JSON-RPC error -32600 "invalid request"

  @id:v2-initialize-frame-limit @req:SDP2-S44 @req:SDP2-134 @must
  Scenario Outline: A frame limit other than 65,536 bytes is refused, naming the frame limit (<limit> bytes)
    Given a freshly started provider
    When the host initializes it announcing a frame limit of <limit> bytes
    Then the handshake is refused as an invalid spec naming data_transport.max_frame_bytes

    Examples:
      | limit   |
      | 65535   |
      | 65537   |
      | 16384   |
      | 1048576 |

  @id:v2-second-initialize-keeps-transport @req:SDP2-S45 @must
  Scenario: A second initialize naming another socket leaves every data channel on the first
    Given a freshly started provider that has been initialized
    And a sandbox created through that provider
    When the host initializes it again, announcing another data socket
    And the host writes a file through that provider and reads it back
    Then the write and the read succeeded, each through a data channel opened on the first socket
    And nothing ever connected to the other socket

  # Hosts read the version 1 name exec.cancel as an alias of exec.stop; a declaration naming both is a
  # field given twice, which those readers refuse.
  @id:v2-declares-exec-stop @req:SDP2-022 @must
  Scenario: The exec capabilities name the stop flag once, as a boolean
    Given a provider
    Then the provider's exec capabilities carry the stop flag exactly once, as exec.stop or by its alias exec.cancel, and it is a boolean
