"""How a question is answered once its passages are known: declined (nothing relevant was found), extractive
(the passage's own sentences), or generative (the LLM, from a short context). ``policy`` holds the profile's
choices, ``gate`` the out-of-scope decision, ``extract`` the sentence picker, ``loops`` the repeated-phrase
check, ``answerer`` puts them together for a reply."""
