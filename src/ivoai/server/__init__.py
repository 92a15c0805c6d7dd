"""Server side: gateway, auth, context service, memory service, skills."""
