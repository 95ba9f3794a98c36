"""What the model can do: tools, commands, instructions, history (the step loop is bot.task)."""
