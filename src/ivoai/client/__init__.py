"""Client side: config, agents, compression, working context, sessions, knowledge, connections."""
