"""Route dependencies of the chat: the parts a chat uses, built once by the app when it starts
(`app.state.chat`, `app.py`)."""

from typing import Annotated

from fastapi import Depends, Request

from controlcenter.chat.service import ChatParts


async def get_chat_parts(request: Request) -> ChatParts:
    parts: ChatParts = request.app.state.chat
    return parts


ChatPartsDep = Annotated[ChatParts, Depends(get_chat_parts)]
