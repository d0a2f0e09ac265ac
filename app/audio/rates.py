"""Audio sample rates, named once.

The wire carries PCM16 mono at 24 kHz both ways (the OpenAI Realtime API's ``audio/pcm``); VAD and ASR work
at 16 kHz. Every other rate (a TTS voice's, a WebRTC codec's) is converted at the edge that meets it.
"""

#: Caller audio on the wire (``input_audio_buffer.append``).
INPUT_RATE = 24_000
#: Reply audio on the wire (``response.output_audio.delta``) and on the WebRTC reply track.
OUTPUT_RATE = 24_000
#: What Silero VAD and Whisper consume.
ASR_RATE = 16_000
