"""The netconsole channel: UDP receiver, datagram parser, fragment reassembly, msgid loss."""
