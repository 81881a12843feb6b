"""Types shared by the providers, the tools and the chat loop."""
