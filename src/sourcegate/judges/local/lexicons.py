"""Cue lexicons for the passage-only questions (prompt injection, superseded), several languages.
Patterns run on accent-folded, lower-cased text (see `text.fold`)."""

from __future__ import annotations

import re

# Text addressed to an AI assistant / model / system rather than to a human reader.
INJECTION_STRONG = [
    r"\b(ignore|disregard|forget|override|bypass|skip)\b.{0,40}\b(previous|prior|above|earlier|preceding|all|any|your|system|original|initial)\b.{0,30}\b(instruction|instructions|directions|directives|prompt|prompts|rules|guidelines|context)\b",
    # messages and commands only when they came before ("ignore any deprecation messages in this output" is a manual's)
    r"\b(ignore|disregard|forget|override|bypass)\b.{0,40}\b(previous|prior|above|earlier|preceding|system|original|initial)\b.{0,30}\b(messages?|commands?)\b",
    r"\b(new|updated|real|actual|hidden|secret|additional|important) (system )?(instructions?|directives?|task|orders)\b\s*([:!]|-(\s|$)|—)",
    # a manual's "you are now ready to ...", "in safe mode", "editing the file" tells a person where they are
    r"\byou are now\b(?! (ready|able|in|on|at|back|inside|done|logged|connected|set|free|finished|asked|prompted|\w+ing)\b)|\bfrom now on,? you\b|\bhenceforth,? you\b|\byou will now\b|\byou must now\b",
    r"\bas an? (ai|language model|llm|assistant|chatbot|large language model)\b",
    # addressed, not merely mentioned: a vocative or a "note to the AI" at the start of a sentence or line
    r"(^|[\n.!?;>\[(|*#-]\s*)(hey |dear |hello |hi |attention,? |(a )?(note|message|instructions?|notice|reminder|request) (to|for) |to )?(the |any |all |every |each )?(ai|a\.i\.|llms?|gpt|chatbots?|bots?|ai (assistant|agent|model|system|tool|reader|summari[sz]er)s?|(language|ai) models?|(virtual|digital|ai|meeting|writing|coding|research|email|e-mail) assistants?|summari[sz]er( bots?)?|summari[sz]ation (bots?|tools?|models?)|automated (assistant|agent|reader|system)s?)\b(?![-‐‑]\d)[^.\n]{0,30}?[:,]",
    r"(^|[\n.!?;>\[(|*#-]\s*)(model|modele|modelo|modell|assistant|assistente|asistente|agent)\s*,\s*[a-z]",
    r"\bif you are (an? |the )?(ai|llm|language model|assistant|bot|chatbot|automated system|machine|model)\b|\b(any|every|each|all|whatever|the) (ai|llm|language model|assistant|bot|chatbot|ai (agent|tool|model|system))s?( \w+){0,2} (reading|processing|summari[sz]ing|parsing|retrieving|that (reads|processes|summari[sz]es|retrieves|parses))\b",
    # a role marker, not a menu path ("System: General Setup: DNS Servers")
    r"(^|\n|\[|<|\|)\s*(system|assistant|ai|user|developer|admin)\s*(\]|>|:(?!\s*\w[\w .-]{0,30}:))",
    # a named assistant product addressed: "Hey Copilot, ...", "ChatGPT: ..."
    r"(^|[\n.!?;>\[(|*#-]\s*)(hey |hi |hello |dear |ok |okay )(copilot|chat ?gpt|claude|gemini|bard|llama|mistral|le chat|perplexity)\b[^.\n]{0,20}?[:,]",
    r"(^|[\n.!?;>\[(|*#-]\s*)(copilot|chat ?gpt|claude|gemini|bard|llama|mistral|perplexity)\s*,\s*(please|ignore|do|don.?t|tell|say|write|answer|reply|respond|summari[sz]e|add|remove|send|forward|include|when|if|you|from now)\b",
    # a conditional address to whatever system reads the document
    r"\b(if|when|whenever|once|while) (an?|the|any|some) (ai|llm|language model|assistant|chatbot|bot|model|agent|automated (system|reader|tool|agent)|ai (system|tool|agent|model|assistant))s? (is |are )?(reads?|reading|processes|processing|summari[sz]es|summari[sz]ing|parses|parsing|completes|completing|answers|answering|ingests|ingesting|handles|handling|sees|indexes|indexing) (this|these|the (document|page|file|e-?mail|message|minutes|report|text|passage|note|content|article|thread|ticket|quiz))\b",
    # an exfiltration link that carries a template placeholder for the reader's output
    r"\]\([^)\s]*[?&][\w-]+=[^)\s]*\{[^}]{2,40}\}",
    # German / Spanish / French: "if you are an AI", "assistant:" at the start of a line
    r"\b(wenn|falls|sofern) (du|sie) (eine? |ein )?(ki|sprachmodell|ki-\w+|assistent|chatbot)\b|\bsi (tu es|vous etes|eres|es usted) (une? |una? )?(ia|assistant|asistente|modele|modelo|chatbot|robot conversationnel)\b",
    r"(^|\n|\[|<|\|)\s*(assistent|asistente|assistente|ki|ia)\s*(\]|>|:)",
    r"<\|?(im_start|im_end|system|endoftext)\|?>|\[/?inst\]|\[/?sys\]|<<sys>>",
    r"\bsystem prompt\b|\bsystem message\b|\binitial prompt\b|\bprompt injection\b|\bjailbreak|\bdeveloper mode\b|\bdan mode\b|\bdo anything now\b",
    r"\b(respond|reply|answer|output|print|say|write|return)( back)? (only|exclusively|just)( with)?\b(?! (to|when|if|once|after|on)\b)",
    r"\bdo not (tell|inform|mention|reveal|disclose|show|let)( this| it| that)? (to )?(the )?(user|human|reader|anyone)\b",
    r"\b(tell|inform|remind|convince|persuade|ask|instruct|direct) the (user|human|reader)\b",
    r"\bin your (answer|response|reply|summary|output|next message|completion)\b",  # "in the response" is HTTP's
    r"\b(to|into|in) your (answer|response|output|completion)s?\b|\b(enhance|augment|begin|start|end|format|provide|prefix|conclude) your (answer|response|reply|output|completion)s?\b",
    r"\byour (answer|response|output|completion)s? (must|should|will|has to|needs to)\b",
    # instructions that reshape the reader's answer: only a system that answers is addressed
    r"\b(letters|words|spaces|vowels|characters|sentences?|text|parts?|end|beginning|start) (of|in|from) your (answer|response|output|completion|reply|message)s?\b",
    r"\b(modify|rewrite|change|alter|render|encode|reverse|scramble|jumble|rearrange|group|remove|replace|add|insert|include|append|translate) (\w+ ){0,3}(of |in |to |into )?your (answer|response|output|completion)s?\b",
    r"\b(when|if|while) (summari[sz]ing|answering|responding|you (summari[sz]e|answer|respond|read|process))\b",
    r"\b(when|while) generating (a |an |the )?(summary|summaries|answer|answers|response|responses|reply|replies|action items|minutes|output)\b",
    # "your instructions" addresses the reader; "the instructions" and "your training" are a manual's own words
    r"\byour (instructions|guidelines|programming|restrictions|filters|safety (rules|guidelines)|content policy)\b",
    # a role imposed on the reader ("act as a preservative", "pretend to be your bank" are not)
    r"\bpretend (that )?(you are|you're)\b|\b(roleplay|role-play) as\b|\b(act|behave) (as if you|as though you|like you are)\b|"
    r"\b(act|behave) as (an? |the )?(unrestricted|unfiltered|uncensored|jailbroken|evil|ai|assistant|chatbot|language model|llm|dan)\b",
    # French
    r"\b(ignore[rsz]?|oublie[rsz]?|ne tiens? pas compte)\b.{0,40}\b(instructions?|consignes?|regles|directives?|messages?) (precedent|anterieur|ci-dessus)",
    r"\b(tu es|vous etes) (desormais|maintenant|a present)\b|\ba partir de maintenant,? (tu|vous)\b",
    r"\ben tant qu.?(ia|intelligence artificielle|assistant|modele)\b",
    r"(^|[\n.!?;>\[(|*#-]\s*)((note|message|consigne|remarque|hinweis|nota|aviso|instrucciones?|anweisung|instructions?) (a|au|a l.|aux|pour|pour l.|an|an das|an den|an die|fur|fur das|fur den|para|para el|para la|al|a la) )?(l.|das |den |die |el |la )?(ia|ki|intelligence artificielle|kunstliche intelligenz|inteligencia artificial|assistant(e)? (ia|d.ia|virtuel)|asistente( de ia| virtual)?|ki-(modell|assistent|system|agent)|sprachmodell|modele (de langage|d.ia)|modelo (de lenguaje|de ia))\b(?![-‐‑]\d)[^.\n]{0,30}?[:,]",
    r"\bsi (tu es|vous etes) (une? )?(ia|assistant|modele|robot)\b|\b(ia|assistant|modele) qui (lis|lit|lisez|traite|resume)s?\b|\bwenn du (eine |ein )?(ki|sprachmodell|assistent)\b|\bsi (eres|es) (una? )?(ia|asistente|modelo)\b",
    r"\b(reponds|repondez|ecris|ecrivez|affiche|affichez) (uniquement|seulement)\b",
    r"\bne (dis|dites) (rien|pas) a l.?utilisateur\b|\b(dis|dites) a l.?utilisateur\b|\bdans ta reponse\b|\bdans votre reponse\b",
    r"\bnouvelles? (instructions?|consignes?)\s*[:!]|\binvite systeme\b|\bprompt systeme\b",
    # German / Spanish / Italian
    r"\b(ignoriere|vergiss|missachte)\b.{0,40}\b(anweisungen|befehle|regeln|anweisung)\b|\bdu bist (jetzt|nun)\b|\bals (ki|sprachmodell)\b",
    r"\b(ignora|olvida|ignore)\b.{0,40}\b(instrucciones|istruzioni|reglas)\b|\b(ahora eres|ora sei)\b",
]

INJECTION_WEAK = [
    r"\b(ai|virtual|digital) assistant\b|\blanguage model\b|\bllms?\b|\bchat ?gpt\b|\bgpt-?\d|\bchatbot\b|\bclaude\b|\bcopilot\b|\bgemini\b|\bbard\b|\bassistant (ia|virtuel)\b|\bmodele de langage\b",
    r"\b(the )?user\b",
    r"\b(assistant|model|bot)\b|(?<![’'])\bai\b",
    r"\binstructions?\b|\bprompt\b",
    r"\b(you|your)\b",
    r"\b(must|should) (now|immediately)\b",
    r"https?://|www\.",
    r"\b(click|visit|go to|download)\b",
    r"\b(summary|summarize|summarise|translate|repeat|respond|reply)\b",
    r"\b(urgent|important|attention|note to)\b\s*[:!]",
]

# Self-declared revision status: superseded, archived, withdrawn, no longer valid. Strong cues are
# about the document itself (a self-reference, a status line, a header or title marker); the same
# words about other documents, records, equipment or parts ("the 2023 plan was superseded", "archive
# room B", "faulty pumps are withdrawn from service, do not use") are weak cues only. A self-reference
# does not reach across a comma: "this instruction supersedes WI-3, which was withdrawn" is current.
_SELF = (r"(this|the present|current) (document|procedure|revision|version|edition|manual|page|sop|instruction|"
         r"work instruction|standard|policy|guideline|guide|note|bulletin|specification|form|rev\.?|runbook|plan|"
         r"sheet|data ?sheet|checklist|handbook|memo|notice|copy|file|section|article|issue|leaflet|poster|guidance)")
# words that only ever name a document's status, and words that also label fields of lists and logs
# ("Archive: QA office", "Replaced: seal kit", "Retired: pump P-7"): the latter count as a marker only
# when they stand alone ("[RETIRED]", "ARCHIVED - ...", "Withdrawn." on its own line), not before a colon
_STATUS_ONLY = (r"(obsolete|superseded|deprecated|void|rescinded|perime|perimee|caduc|caduque|veraltet|ungultig|"
                r"obsoleto|obsoleta)")
_STATUS_ALSO = (r"(archived|withdrawn|cancel+ed|expired|outdated|retired|invalid|annule|annulee|archivee|retiree|"
                r"archiviert|zuruckgezogen|archivado|archivada|anulado|anulada|retirado|retirada|derogado|derogada)")
SUPERSEDED_STRONG = [
    _SELF + r"\b[^.,;:!?]{0,40}\b(is|has been|was|are|have been)\b.{0,15}\b(superseded|archived|withdrawn|obsolete|retired|cancel+ed|replaced|deprecated|rescinded|discontinued|invalid|void|no longer|out of date|outdated|expired)\b",
    # a status line, header or title marker: "SUPERSEDED", "[WITHDRAWN]", "OBSOLETE - ...", "(archived 2023)"
    r"(^|\n|\[|\(|\|)\s*" + _STATUS_ONLY + r"\s*(\d{4}|\d{1,2}[/.-]\d{1,2}[/.-]\d{2,4})?\s*(\]|\)|:|\.|-|\u2013|\u2014|!|\n|$)",
    r"(^|\n|\[|\(|\|)\s*" + _STATUS_ALSO + r"\s*(\d{4}|\d{1,2}[/.-]\d{1,2}[/.-]\d{2,4})?\s*(\]|\)|\.|-|\u2013|\u2014|!|\n|$)",
    r"(^|\n|\[|\()\s*(superseded|replaced|cancel+ed( and replaced)?|withdrawn|archived|remplacee?|annulee?( et remplacee?)?|ersetzt|reemplazad[oa]|sustituid[oa]|anulad[oa]) (by|par|durch|por)\s*:?\s*(rev|revision|version|edition|issue|the|a|an|la|le|l.|die|das|den|el|[a-z]{1,8}(-[a-z]{1,8})?[- ]?\d)",
    r"\bsuperseded (as of|on|since|from) |(^|\n|\[|\()\s*(withdrawn|cancel+ed|retired|rescinded|archived) (as of|on|since|from) |\bno longer in (force|effect)\b",
    r"\b(replaced|superseded) by (rev\.?|revision|version|edition|issue) ?[0-9a-z]|\b(replaced|superseded) by the (current|latest|updated|new) (revision|version|edition|procedure|document|issue)\b",
    r"\bcancel+ed and replaced by\b|\bwithdrawn and replaced by\b",
    r"\b(do not|don.?t) (use|print|apply|follow) (this|these) (document|procedure|revision|version|edition|copy|sheet|instructions?|page|form|guide|plan|rev)\b",
    r"\b(not for (operational |field )?use|for (historical|reference|archival|audit) (reference|purposes|use)? ?only|(historical|archival) (record|reference|copy) only|kept for (the )?(record|reference|audit|history|historical reference)( only)?)\b",
    r"\b(archived|obsolete|withdrawn|superseded|deprecated|rescinded|cancel+ed|expired|out of date|outdated|retired) (revision|version|edition|document|procedure|copy|rev|sop|page|runbook|instruction)\b",
    r"\b(status|etat|statut|estado)\s*[:=-]\s*(archived|obsolete|superseded|withdrawn|deprecated|retired|cancel+ed|archive|perime|retire|annule|caduc|remplace|archiviert|zuruckgezogen|ungultig|obsoleto|anulado|archivado|retirado)",
    r"\bthis (revision|version|edition|page) (is|has been) (kept|retained|archived|no longer maintained)\b|\bno longer (maintained|updated) and (kept|retained)\b|\b(this|the) page is no longer (maintained|updated)\b",
    # French
    r"\b(ce|cette|le present|la presente) (document|procedure|revision|version|edition|manuel|note|fiche|mode operatoire|consigne|guide|plan|instruction|page)\b[^.,;:!?]{0,40}\b(est|a ete)\b.{0,15}\b(archive|archivee|perime|perimee|obsolete|caduc|caduque|retire|retiree|abroge|abrogee|remplace|remplacee|annule|annulee|plus (valable|valide|en vigueur|applicable))\b",
    r"\bannulee?s? et remplacee?s? par\b|\bremplacee?s? par (la |le |l.)?(revision|version|edition|rev)\b",
    r"\bn.?est plus (valable|valide|en vigueur|applicable|a jour|utilisable)\b|\bne plus (utiliser|appliquer|afficher)\b|\bplus en vigueur\b",
    r"\b(version|revision|edition|document|fiche|procedure|note|consigne|mode operatoire) (archivee?|perimee?|obsolete|caduque?|retiree?|annulee?(?! et remplace))\b",
    r"\b(conservee?s?|gardee?s?) (a titre (d.)?(historique|de reference|d.archive|d.information)|pour memoire)\b",
    # German, Spanish, Italian, Portuguese, Dutch
    r"\bersetzt durch\b|\bnicht mehr gultig\b|\bzuruckgezogen\b|\baußer kraft\b|\bausser kraft\b|\bnicht mehr (anwenden|verwenden|benutzen|anzuwenden)\b|\barchivexemplar\b|\b(dieses|diese) (dokument|verfahren|anweisung|fassung|version|ausgabe|revision)\b[^.,;:!?]{0,40}\b(veraltet|archiviert|ungultig|aufgehoben)\b",
    r"\b(reemplazad[oa]|sustituid[oa]) por (la|el) (revision|version|edicion|procedimiento|documento)\b|\bya no (es|esta) (valid|vigente)|\b(quedo|ha quedado|queda) (sin efecto|anulad[oa]|derogad[oa])\b|\b(este|esta) (documento|procedimiento|version|revision|plan|instruccion|norma|guia|ficha)\b[^.,;:!?]{0,40}\b(ha sido|fue|queda|esta) (reemplazad|sustituid|anulad|derogad|retirad|archivad)[oa]\b|(^|\n)\s*(documento|procedimiento|version|revision|plan|instruccion|norma|guia|ficha) (retirad|anulad|obsolet|archivad|derogad)[oa]\b",
    r"\bsostituit[oa] da\b|\barchiviat[oa]\b|\bnon (e )?piu valid|\bnon piu in vigore\b",
    r"\bsubstituid[oa] por\b|\bnao (e|esta) mais valid|\bvervangen door\b|\bniet meer geldig\b|\bgearchiveerd\b",
]

SUPERSEDED_WEAK = [
    r"\b(obsolete|withdrawn|superseded|deprecated|archived|retired|outdated|rescinded|cancel+ed|expired|decommissioned|discontinued)\b",
    r"\b(archive|archives|archivee?s?|archiv\w*|archiv[oa]s?|archivad[oa]s?)\b",
    r"\b(rev(ision)?|version|edition)\.? ?[0-9a-z]\b",
    r"\breplaced by\b|\bremplacee? par\b|\bersetzt\b|\b(reemplazad|sustituid)[oa]\b",
    r"\b(current|latest|new|updated) (revision|version|edition|procedure)\b",
    r"\b(valid|effective|in force|en vigueur) (until|from|since|jusqu|depuis)\b",
    r"\bdo not use\b|\bno longer\b|\bne pas utiliser\b|\bnicht (mehr )?verwenden\b|\bno (usar|utilizar)\b",
    r"\b(caduc|caduque|perimee?|abrogee?|veraltet|obsolet[oa]|derogad[oa])\b",
]

# an AI system, by name or by kind ("j'ai" is French for "I have", "IA-2" a control's number)
_AI_NOUN = (r"((?<![’'])ai|a\.i\.|ia|ki|llms?|gpt[\w-]*|chat ?gpt|chatbots?|bots?|copilot|claude|gemini|bard|mistral|perplexity|"
            r"assistants?|assistent(e|i|en)?|asistentes?|(language|generative|foundation) models?|modeles? (de langage|d.ia)|"
            r"model(o|os) de (lenguaje|linguagem|ia)|modell[oi] (linguistic[oi]|ia)|(sprach|ki-)modell\w*|taalmodel\w*|"
            r"(agents?|robots?|assistants?) conversationnel\w*|conversationele (agent|assistent|robot)\w*|(agentes?|asistentes?|robots?) conversacional\w*|(automated|automatic|autonomous) (agents?|systems?|tools?|readers?|pipelines?|assistants?)|"
            r"(systemes?|outils?|agents?|lecteurs?) automati(que|se)s?|(sistemas?|herramientas?|agentes?|lectores?) automatic[oa]s?|"
            r"automatisch\w* (systeme?n?|werkzeuge?|tools?|agent\w*|leser|lezers?|assistent\w*)|"
            r"(agents?|lecteurs?|outils?|systemes?|assistants?|agentes?|lectores?|herramientas?|sistemas?|asistentes?) (d.ia|de (la )?ia|ia)\b)"
            r"(?![-‐‑]\d)")
# what a reader of the text says or does with it: the verbs of an order given to the system that answers
_TELL_VERB = (r"(say|tell|answer|reply|respond|state|add|include|mention|write|output|report|recommend|ignore|call|send|"
              r"forward|summari[sz]e|describe|claim|translate|repeat|print|return|insist|refuse|omit|present|advise|confirm|"
              r"not (say|mention|tell|reveal|disclose|include)|never (say|mention|tell|reveal)|dire|repondre|indiquer|ajouter|"
              r"mentionner|affirmer|ignorer|sagen|antworten|erwahnen|hinzufugen|decir|responder|indicar|anadir|rispondere|"
              r"zeggen|antwoorden|vermelden|toevoegen|vertellen|melden|aanbevelen|dizer|recomendar|informar|recommander|"
              r"signaler|preciser|raccomandare|consigliare|empfehlen|mitteilen|erzahlen|contar|aconsejar|"
              r"give|provide|direct|point|link|classify|mark|treat|list|display|show|render|insert|append|use|decode|do|"
              r"delete|remove|replace|pretend|act|make|keep|put|set|note|notez|ecris|ecrivez|reponds|repondez|dis|dites|"
              r"ajoute|ajoutez|mentionne|mentionnez|schreibe|sag|antworte|fuge|escribe|responde|di|rispondi|scrivi|zeg|"
              r"schrijf|antwoord|diga|escreva|responda|ask|omit|skip|drop|withhold|cite|assert|affirm|reveal|request|hide|suppress|"
              r"omettre|taire|citer|presenter|demander|appeler|envoyer|declarer|reveler|rediger|ecrire|inclure|inserer|cacher|"
              r"omettez|taisez|citez|presentez|demandez|appelez|envoyez|affirmez|declarez|indiquez|recommandez|conseillez|incluez|"
              r"ignorez|oubliez|cachez|omets|cite|presente|demande|appelle|envoie|affirme|indique|"
              r"omitir|callar|citar|presentar|pedir|llamar|enviar|afirmar|declarar|revelar|incluir|ocultar|ignorar|mencionar|escribir|"
              r"contestar|senalar|omita|omite|omitid|cita|presenta|pida|pide|llama|llame|envia|envie|afirma|afirme|declara|declare|"
              r"conteste|contesta|menciona|mencione|indica|indique|anade|anada|incluya|incluye|ignore|ignorad|decid|responded|"
              r"weglassen|auslassen|verschweigen|zitieren|darstellen|angeben|behaupten|nennen|bitten|auffordern|fragen|schreiben|"
              r"ausgeben|bestatigen|senden|schicken|aufrufen|ignorieren|beantworten|verweisen|verschweige|lass|zitiere|nenne|"
              r"behaupte|bestatige|schreib|sende|schicke|rufe?|beantworte|empfiehl|gib|teilt?|antwortet|sagt|schreibt|nennt|zitiert|"
              r"weglaten|verzwijgen|citeren|voorstellen|weergeven|noemen|vragen|verzoeken|schrijven|beweren|bevestigen|sturen|"
              r"versturen|aanroepen|negeren|beantwoorden|aanraden|adviseren|citeer|noem|vraag|beweer|bevestig|stuur|roep|negeer|"
              r"beantwoord|raad|adviseer|meld|vermeld|geef|laat|zegt|antwoordt|vermeldt|conseiller|annoncer|renvoyer|marquer|classer|"
              r"aconsejar|anunciar|marcar|clasificar|enlazar|markieren|einstufen|ankundigen|markeren|melden|aankondigen|verwijzen)")
_MODAL = (r"(must|should|shall|has to|have to|needs? to|is to|are to|is (asked|instructed|expected|required) to|"
          r"are (asked|instructed|expected|required) to|doit|doivent|devra|devront|devrait|muss|mussen|soll|sollen|sollte|"
          r"devez|devons|dois|debe|deben|debera|debes|deve|devono|devi|dovra|moet|moeten|zal|zullen|devem|devera|devemos|"
          r"is supposed to|are supposed to|ought to|darf|durfen|mag|mogen|dient|dienen|hoeft|hoeven|tiene que|tienen que|"
          r"han de|ha de|debereis|deberan)")
_READING = (r"(reading|processing|summari[sz]ing|parsing|quoting|answering|indexing|ingesting|retrieving|consulting|"
            r"handling|helping|reads|lit|liest|lee|legge|leest|is (asked|reading|processing|answering|summari[sz]ing)|"
            r"(that|which|who|qui|die|que|che) (reads?|process(es)?|summari[sz]es?|quotes?|answers?|retrieves?|lit|lisent|"
            r"traite|traitent|resume|resument|liest|lesen|lee|leen|legge|leggono|leest|lezen|le|leem)|lisant|lesend\w*|"
            # more verbs of reading a text, the second person ("robots qui consultez ce manuel"), the Spanish subjunctive
            r"(that|which|who|qui|que) (consults?|cites?|index(es)?|parses?|lisez|consultez|traitez|resumez|citez|citent|relaient|"
            r"analysent|indexent|parcourent|repond|repondent|lees|consultas|procesas|lea|lean|procesa|procesan|procese|procesen|resuma|"
            r"resuman|resumen|cita|citan|cite|citen|responda|respondan|consulta|consultan|consulte|consulten|analiza|analizan|analice|"
            r"analicen|indexa|indexan|indexe|indexen)|"
            # a relative clause whose verb follows its object (German, Dutch): "die dieses Dokument lesen", "dat dit citeert"
            r"(die|das|dat|welche[rs]?|der) ([\w'’-]+[\s,]+){0,3}?(liest|lesen|verarbeitet|verarbeiten|zusammenfasst|zusammenfassen|"
            r"zitiert|zitieren|auswertet|auswerten|durchsucht|durchsuchen|indexiert|indexieren|antwortet|antworten|leest|lezen|verwerkt|"
            r"verwerken|samenvat|samenvatten|citeert|citeren|raadpleegt|raadplegen|doorzoekt|doorzoeken|indexeert|indexeren|"
            r"antwoordt|antwoorden)|"
            # using the text itself, not a sensor or a pump ("el modelo que usa esta bomba" is a product's)
            r"(that|which|who|qui|que) (uses?|utilise|utilisent|consulte|consultent|usa|usan|use|usen|utiliza|utilizan|utilice|utilicen) "
            r"((this|these|ce|cette|ces|esta|este|estos|estas) (text|texte|texto|page|pagina|document|documento|manual|manuel|note|"
            r"section|seccion|article|articulo|fichier|archivo|file|contenu|contenido|content)|ceci|cela|esto|this)\b|"
            r"(die|das|dat|welche[rs]?) (dies|dit|diese[rn]?|dieses|deze)( [\w'’-]+)? (nutzt|nutzen|verwendet|verwenden|gebruikt|gebruiken))")

# A unit that shows whom it addresses or what it overrides: an AI system spoken to (not merely named: "the
# model reading this must say...", "Chatbots quoting this page must add...", "Note for the AI:", "Hey Claude,"),
# an order to drop earlier instructions or rules, a role marker, the reader's own answer reshaped, the text's
# use for answering or summarising, the person the reader answers told something. Ordinary text mostly shows
# none of these, text about AI tools ("our support chatbot answered 3,100 questions", "gcloud ai models list")
# included; the injection reader reads a unit that shows none as far less likely addressed to an AI
# (`model.InjectionReader`).
INJECTION_ADDRESSEE = [
    # an AI system spoken to: told what to say or do, reading the text, or the one a note is for
    r"\b" + _AI_NOUN + r"[\w'’-]*([\s,]+[\w'’-]+){0,6}?[\s,]+" + _MODAL + r"([\s,]+[\w'’-]+){0,3}?[\s,]+" + _TELL_VERB + r"\b",
    r"\b(" + _AI_NOUN + r"|models?|modeles?|modelos?|modell[oi]?|modellen|robots?|roboter)([-‐][\w'’-]+)?\b([\s,]+[\w'’-]+){0,2}?[\s,]+" + _READING + r"\b",
    r"\b(to|for|pour|para|per|fur|voor|an|a|aux?) (the |any |every |all |each |le |la |les |el |o |il |l.|das |den |die |der |het |de )?"
    r"(" + _AI_NOUN + r"|models?|modeles?|modelos?|modell[oi]?)\b\s*([,:;!]|$|\.\s|\. ?$)",
    # the header form, the AI in a compound or after a participle: "for AI agents:", "pour les agents IA :",
    # "an KI-Leser:", "voor AI-agenten:", "to the answering AI:"
    r"\b(to|for|pour|para|per|fur|voor|aan|an|a|aux?|al) (the |any |all |every |each |le |la |les |l.|el |los |las |o |il |gli |"
    r"das |den |die |der |het |de |alle |elke |ieder |tous les |toutes les |todos los |todas las |tout |toute |jeden |jede |jedes |"
    r"cualquier |todo |toda )?([\w'’-]+ ){0,2}?(" + _AI_NOUN + r"|models?|modeles?|modelos?|modell)"
    r"([-‐][\w'’-]+)?\b( (readers?|agents?|assistants?|models?|systems?|tools?|bots?|lecteurs?|agentes?|lectores?|asistentes?|leser|"
    r"lezers?|assistenten|agenten|systeme?n?|sistemas?|modell\w*|modelos?|modeles?))?"
    r"(,? (qui|que|die|der|das|dat|that|who|which) [\w'’-]+( [\w'’-]+){0,3}?|"
    r" (of|de|du|des|del|van|von) (this|these|ce|cette|ces|dieser|diese[rns]?|deze|dit|este|esta|estos|estas) [\w'’-]+|"
    r" (answering|generating|summari[sz]ing|reading|writing|processing|drafting|quoting)( [\w'’-]+){0,2}?)?\s*:",
    r"(^|[\n.!?;>\[|*#-]\s*)((hey|dear|hi|hello|ok|okay|attention|cher|chere|liebe|lieber|querido|querida|caro|cara|beste)[\s,]+)?"
    r"(the |any |every |all |each |l.|la |le |el |die |der |das |de |het |o |il |\w+ )?" + _AI_NOUN + r"\b\s*[,:!]",
    # spoken to anywhere: "Also, AI, mention...", "Assistant, render the image", "chatbot: say ..."
    r"\b" + _AI_NOUN + r"\s*[,:]\s*(please |now |also |then |always |never |do not |don't |ne |n')?" + _TELL_VERB + r"\b",
    # a label at the start of a unit: "For AI agents:", "Editor's note for AI news aggregators:", "[NOTE TO AI]:"
    r"^\W*(\w+\W+){0,5}?" + _AI_NOUN + r"([-‐][\w'’-]+)?\b( [\w'’-]+){0,2}\W{0,3}:",
    # an AI spoken to after a pronoun: "you, the assistant,", "du, der Assistent,", "jij, de assistent,", "tu, el asistente,"
    r"\b(you|toi|tu|du|jij|usted|vous|voi|u)\s*,\s*(the |l.|der |die |das |de |het |el |la |il |o |a )?" + _AI_NOUN + r"\b\s*,",
    # an order to an AI whose verb ends the clause (German, Dutch): "KI-Modelle sollen jede Rückfrage ... beantworten"
    r"\b" + _AI_NOUN + r"([-‐][\w'’-]+)?\b([\s,]+[\w'’-]+){0,6}?[\s,]+(muss|mussen|soll|sollen|sollte|sollten|darf|durfen|moet|moeten|mag|mogen|"
    r"dient|dienen|zal|zullen)([\s,]+[\w'’„“\"-]+){1,10}?[\s,]+" + _TELL_VERB + r"\s*([.,;:!)]|$)|"
    r"\b" + _AI_NOUN + r"([-‐][\w'’-]+)?\b([\s,]+[\w'’-]+){0,6}?[\s,]+(hat|haben)([\s,]+[\w'’„“\"-]+){1,10}?[\s,]+"
    r"(\w*zu(lassen|geben|nennen|sagen|antworten|schreiben|verschweigen|empfehlen|rufen|senden|schicken|stellen|fugen)|"
    r"zu " + _TELL_VERB + r")\s*([.,;:!)]|$)",
    r"\b(instructions?|notes?|messages?|consignes?|hinweis|nota|aviso|orders?|directives?|anweisung\w*|opdracht\w*|task) "
    r"(to|for|pour|a|an|fur|para|per|voor|aan) (the |l.|das |den |die |el |la |le |il |de |het |any |all )?" + _AI_NOUN + r"\b",
    r"\b" + _AI_NOUN + r" (instructions?|directives?|orders?|commands?|tasks?|note|consignes?|anweisung\w*)\b",
    r"\byou are (now )?(an? |the )([\w-]+ ){0,3}" + _AI_NOUN + r"\b",
    # the reader asked what it is, or told what it now is
    r"\b(if you are|if you're|als je|als u|se (voce|tu) (e|es)|se sei|si (tu es|vous etes|eres|es usted)|wenn du|falls du|wenn sie) "
    r"(een |uma? |una? |un.|an? |ein(e)? |une? |the |l.)?" + _AI_NOUN + r"\b",
    r"\b(you are now|from now on,? you|je bent nu|vanaf nu ben je|du bist (jetzt|nun|ab sofort)|ahora eres|a partir de ahora,? eres|"
    r"agora (voce e|es)|ora sei|desormais,? (tu es|vous etes)|(tu es|vous etes) desormais)\b(?! (ready|able|in|on|at|back|inside|done|logged|connected|set|free|finished|asked|prompted|\w+ing)\b)",
    r"\b(hey|dear|hi|hello|ok|okay|ask|tell|cher|chere|liebe|lieber|querido|querida|caro|cara|beste) (the )?" + _AI_NOUN + r"\b",
    r"\b(used|read|consulted|processed|summari[sz]ed|ingested|retrieved|quoted|utilise|lu|traite|resume|gelesen|verarbeitet|leido|"
    r"procesado|letto|gelezen|lido) (by|par|von|durch|por|da|door) (an? |the |any |un |une |l.|la |le |eine?m? |einen |der |die |das |"
    r"el |una? |il |een |de |het )?" + _AI_NOUN + r"\b",
    # a role marker or a system prompt, named
    r"\b(system|systeem)(e|s)?[- ]?(prompt|instructions?|anweisung\w*|opdracht\w*|message|nachricht|bericht|order)\b|\bsystemanweisung\w*|\bsysteemopdracht\w*",
    r"\b(prompt|instructions?|anweisung\w*|message|consigne|instruccion|istruzione|instrucao|ordre|orden|ordine)s? (du |del |di |des |de |do |des )?(systeme|sistema|systems?)\b",
    # a prompt, not a shell's ("at the command prompt") nor the verb ("prompt the user for a password")
    # a prompt, not a shell's or an installer's ("at the prompt", "the $ prompt", "answer the prompt", "the prompt
    # has changed")
    r"(?<!command )(?<!shell )(?<!login )(?<!password )(?<!terminal )(?<!console )(?<!at the )(?<!in the )(?<!\$ )(?<!> )"
    r"(?<!answer the )(?<!respond to any )(?<!respond to the )\bprompts?\b"
    r"(?! (for|the user|users|you|it gives|is (now )?shown|has changed|changes|appears|will be shown|a change|change|s.affiche|apparait)\b)",
    r"(^|[^\w\s]\s*)(system|assistant|systeme|sistema|assistente|asistente|assistent)\s*:(?!\s*\w[\w .-]{0,30}:)",
    # an order to drop what came before, or the reader's own rules ("forget your guidelines"); a reminder to a
    # person is not one ("don't forget your VM data", "n'oubliez pas vos clés", "vergeet niet ...")
    r"(?<!don't )(?<!dont )(?<!do not )(?<!never )(?<!n')(?<!no )\b(ignore|ignoring|disregard|forget|override|bypass|ignorez|ignora|"
    r"ignoriere|negeer|oublie\w*|olvida\w*|vergiss|vergeet|dimentica|esqueca)\b(?! (niet|nicht|pas|no)\b)"
    r".{0,40}\b(previous|prior|above|earlier|preceding|before|all|everything|alles|tout|todo|tutto|alle|tudo|sopra|hierboven|oben|ci-dessus|"
    r"anterior\w*|precedent\w*|vorherig\w*|eerdere|acima|arriba|guidelines|rules|regeln|reglas|regole|regels|regras|instructions?|"
    r"consignes|regles|directives|anweisungen|vorgaben|instrucciones|instructies|istruzioni|instrucoes)\b",
    # the reader's own answer, reshaped; a reply restricted
    r"\b(your|ta|votre|tes|vos|deine?r?|tu|tus|tua|tue|je|jouw|sua|seu) (answer|response|reply|output|completion|reponse|"
    r"antwort|respuesta|risposta|antwoord|resposta)s?\b",
    r"\b(reply|respond|answer|say|state|output|write|repondez|reponds|antworte|responde|rispondi|antwoord|responda)\w* "
    r"(only|just|exclusively|seulement|uniquement|nur|solo|solamente|alleen|somente|apenas)\b(?! (to|when|if|once|after|on)\b)",
    r"\b(answers?|repl\w+|responses?|reponses?|antwort\w*|respuestas?|rispost\w+) (automatique|automatic|automated|automatica|automatisch\w*|generee|generad\w*)s?\b",
    r"\b(automated|automatic|automatique|automatisch\w*|automatica|automatico|automatizad\w*|generated|generees?|generad\w*|generat\w*) "
    r"(answers?|repl\w+|responses?|reponses?|antwort\w*|respuestas?|rispost\w+|summar\w*|resumes?)\b",
    # the text's own use for answering or summarising
    r"\b(this|these|ce|cette|ces|dieser|diese|dieses|este|esta|estos|questo|questa|deze|dit|isto) "
    r"(text|texte|texto|testo|tekst|page|pagina|seite|document|documento|dokument|file|fichier|manual|manuel|handbuch|note|passage|article|artikel|articolo)\b"
    r".{0,60}\b(answer|respond|reply|summar|quot|repond|resum|antwort|beantwort|zusammenfass|rispond|riassum|samenvat)\w*",
    r"\b(answer|respond|reply|summar|quot|repond|resum|antwort|beantwort|zusammenfass|rispond|riassum|samenvat)\w* .{0,40}\b(this|ce|cette|dieser|diesen|este|esta|questo|questa|deze|dit) "
    r"(text|texte|texto|testo|tekst|page|pagina|seite|document|documento|dokument|file|fichier|manual|manuel|note|passage|article)\b",
    # the person the reader answers, told something
    r"\b(tell|inform|remind|convince|dis|dites|sag|sage|sagt|di|dile|diga|vertel|teile|informe|comunica)\w* (the |to |a |al |all'|aux? |dem |den |de |l'|le |les |agli )?"
    r"(users?|humans?|readers?|utilisateurs?|usuarios?|nutzern?|benutzern?|gebruikers?|utenti|utente|lecteurs?|leser|lector|lettore|lezer)\b",
]

INJ_STRONG_RE = [re.compile(p) for p in INJECTION_STRONG]
INJ_WEAK_RE = [re.compile(p) for p in INJECTION_WEAK]
INJ_ADDRESSEE_RE = [re.compile(p) for p in INJECTION_ADDRESSEE]
SUP_STRONG_RE = [re.compile(p) for p in SUPERSEDED_STRONG]
SUP_WEAK_RE = [re.compile(p) for p in SUPERSEDED_WEAK]

ARCHIVED_STATUS = {"archived", "superseded", "withdrawn", "obsolete", "deprecated", "retired", "expired",
                   "cancelled", "canceled", "void", "inactive", "historical", "archive", "archivee", "perime"}

ANTONYMS = [
    ("required", "optional"), ("required", "not required"), ("mandatory", "optional"), ("allowed", "forbidden"),
    ("allowed", "prohibited"), ("permitted", "prohibited"), ("open", "closed"), ("open", "close"),
    ("increase", "decrease"), ("increases", "decreases"), ("increased", "decreased"), ("higher", "lower"),
    ("more", "less"), ("before", "after"), ("always", "never"), ("hot", "cold"), ("on", "off"),
    ("start", "stop"), ("maximum", "minimum"), ("max", "min"), ("above", "below"), ("inside", "outside"),
    ("safe", "unsafe"), ("safe", "dangerous"), ("true", "false"), ("yes", "no"), ("first", "last"),
    ("clockwise", "counterclockwise"), ("clockwise", "anticlockwise"), ("positive", "negative"),
    ("wet", "dry"), ("full", "empty"), ("large", "small"), ("larger", "smaller"), ("early", "late"),
    ("earlier", "later"), ("north", "south"), ("east", "west"), ("win", "lose"), ("won", "lost"),
    ("rise", "fall"), ("rose", "fell"), ("accept", "reject"), ("accepted", "rejected"), ("legal", "illegal"),
    ("enable", "disable"), ("enabled", "disabled"), ("connect", "disconnect"), ("lock", "unlock"),
    ("energized", "de-energized"), ("live", "dead"), ("inlet", "outlet"), ("upstream", "downstream"),
    ("supply", "return"), ("internal", "external"), ("manual", "automatic"), ("daily", "weekly"),
    ("weekly", "monthly"), ("monthly", "yearly"), ("monthly", "annually"), ("male", "female"),
    ("man", "woman"), ("men", "women"), ("boy", "girl"), ("young", "old"), ("new", "old"),
    ("obligatoire", "facultatif"), ("autorise", "interdit"), ("ouvert", "ferme"), ("ouvrir", "fermer"),
    ("avant", "apres"), ("toujours", "jamais"), ("chaud", "froid"), ("haut", "bas"), ("plus", "moins"),
    ("augmenter", "diminuer"), ("entree", "sortie"), ("amont", "aval"),
]
