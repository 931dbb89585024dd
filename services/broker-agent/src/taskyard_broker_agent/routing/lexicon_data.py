"""The rules router's built-in multilingual lexicon: common task and office vocabulary, not any catalog's.

One concept per line: ``english words: keys``. A key is a word or word stem of any language (German,
French, Spanish, Portuguese, Italian, Dutch, Polish, Russian, Japanese, Chinese, Korean, some Swedish,
Czech and Turkish, and English synonyms):
a request word that starts with a key (4 letters or more), equals it (shorter keys, and keys marked
``$``), or, for scripts written without spaces, contains it, counts as the English words on its left.
Keys are normalized like requests (case, accents, width), so ``übersetz`` is written as it is spelled.

Written from general vocabulary (verbs people use to ask for work, and the nouns of common office
domains), tuned on the shipped catalog with its examples removed; never on the held-out routing set.
Add concepts freely; keep keys long enough not to be the start of unrelated words.
"""

LEXICON = """
summarize summary condense: zusammenfass zusammen$ kurzfass resumen resumir resuma resumo resumer resumez riassum riassun sintesi sintetiz samenvat streszcz stresc podsumow ozet$ ozetle 要約 まとめ 总结 概括 摘要 總結 кратко резюмир изложен gist synopsis takeaway recap tldr shorten 요약 sammanfatt shrn
translate translation localize language: ubersetz uebersetz tradu vertaal vertal tłumacz przetłumacz 翻訳 翻译 翻譯 перевед перевод перевест translat cevir 번역 oversatt preloz preklad
review check verify: pruf$ prufe prufen uberpruf kontroll verifi revis relis relire controle controleer nakijk sprawdz przejrz 確認 チェック レビュー 审查 审核 检查 审阅 провер kontrol audit inspect proofread assess verif evaluat critique 검토 확인 리뷰 점검 granska zkontroluj
write draft: schreib verfass ecri redig redacta escrib escrev scriv schrijf schrijv napisz pisz 書い 書く 书写 撰写 写一 напиш yaz$ yazin compose 작성 skriv$ skriva napis
create make: erstell cree$ creer crea$ crear crie$ criar creare maak maken stworz utworz 作っ 作成 制作 创建 созда generat 만들
explain explanation: erklar explique expliqu explica spiega spieg uitleg wyjasn objasn 説明して 解释 解釋 объясн acikla clarif 설명 forklara vysvetl
compare comparison: vergleich compar confront vergelijk porown 比較 比较 сравн karsilastir 비교 jamfor porovn
find search look: suche suchen durchsuch finde$ finden cherch busca buscar procur pesquis cercare trova zoek szuk wyszuk znajdz 検索 探して 搜索 查找 寻找 найд поиск ara$ bul$ search lookup google 찾아 검색 sok$ hledat hledej vyhledej
research investigate: forsch untersuch recherch investig indag onderzo zbadaj badani 調査 研究 调研 调查 исслед 조사 연구
source cite citation: quelle quellen fuente fonte fonti bron$ bronnen zrodl zrodł 出典 引用 来源 出处 источник referenc kaynak 출처 인용
documentation docs: dokumentation documentation documentacion documentacao documentazion documentatie dokumentacj ドキュメント 文档 документац
website web page: webseit internetseit sitio$ pagina strona ウェブ 网站 网页 сайт
calculate compute: berechn rechne calcul bereken oblicz policz 計算 计算 посчит вычисл расчит рассчит arithmet multipl 계산 berakna vypocit
total amount: summe gesamt betrag montant importe importo bedrag kwot 合計 金额 合计 总额 сумм итог 합계 총액
tax vat: steuer mwst mehrwertsteuer umsatzsteuer tva$ iva$ btw$ podat 税金 消費税 增值税 税额 налог ндс kdv$ vergi 세금 부가세 moms$ dph$
invoice bill: rechnung factur fattur fatura faktur 請求書 发票 счет$ счета счёт billing 청구서 송장 인보이스
receipt: beleg quittung kassenbon recu$ recibo ricevut bonnetje paragon 領収書 レシート 收据 小票 чек$ квитанц fis$ fisi$ makbuz 영수증 kvitto uctenk
expense cost: ausgabe kosten spesen frais depens gasto despes spese onkost koszt wydatk 経費 費用 费用 开支 支出 расход затрат spend spent outlay 경비 비용 지출 utgift kostnad vydaj naklad
reimbursement reimburse refund: erstatt ruckerstatt rembours reembols rimbors terugbetal vergoed zwrot 払い戻 返金 精算 退款 报销 возмещ возврат iade$ repay chargeback 환불 환급 정산 aterbetal
travel trip: reise dienstreis fahrt voyage deplacement viaje viagem viaggi trasfert reis$ reizen podroz delegacj 出張 旅行 出差 差旅 командировк поездк 출장 여행 resa$ cestovn
policy rule: richtlini politik politique politica beleid polityk zasad 規定 ポリシー 政策 规定 制度 политик правил guideline 정책 규정
contract agreement: vertrag vereinbar contrat contrato contratt overeenkomst acuerdo acordo accordo umow kontrakt 契約 合同 协议 合约 договор соглашен sozlesme 계약 avtal smlouv
clause terms: klausel claus bestimmung bepaling postanowien zapis$ zapisy 条項 条款 пункт услови 조항
liability: haftung responsabilit responsabilidad aansprakelijk odpowiedzialn 責任 责任 ответственн 책임
confidential nda: vertraulich geheimhalt confidential confidencial riservatezz geheimhoud poufn 秘密保持 保密 机密 конфиденц 비밀유지 기밀
legal law: rechtlich gesetz juridi jurid legale$ wettelijk prawn 法律 法的 法务 юрид закон 법률 법적
job position vacancy role: stelle$ stellenanzeig stellenausschreib stellenangebot poste$ emploi empleo puesto vaga$ emprego lavoro posizion vacatur vacature baan$ praca$ pracy$ stanowisk 求人 職位 职位 岗位 ваканс должност ilan$ ilani 채용공고 구인 직무 일자리 jobbannons inzerat
hire recruit hiring recruiting: rekrut recrut reclut werv$ werven aanneem zatrudn 採用 雇用 招聘 招人 нанят найм 채용 anstall
candidate applicant: kandidat bewerb candidat sollicit kandydat 候補者 応募者 候选人 应聘 кандидат соискател aday 후보자 지원자 uchazec
cv resume: lebenslauf curricul 履歴書 简历 履历 резюме 이력서 zivotopis
interview: vorstellungsgesprach bewerbungsgesprach entretien entrevist colloqui sollicitatiegesprek rozmow 面接 面试 собеседован 면접 intervju pohovor
onboarding: einarbeit onboard integracion integracao inserimento inwerk wdrozen 入社 研修 入职 адаптац
employee staff: mitarbeit angestellt employe emplead funcionari dipendent medewerk werknem pracown 社員 従業員 员工 职员 сотрудник работник personnel 직원
salary pay: gehalt lohn salaire salario salari stipendi salaris wynagrodz pensj 給与 給料 工资 薪资 薪水 зарплат 급여 월급
database data: datenbank donnees datos dados dati$ gegevens dane$ danych データベース 数据库 数据 база данн 데이터베이스
query: abfrage requete consulta interrogazion zapytan クエリ 查询 запрос 쿼리
table: tabelle tableau tabla tabela tabella tabel$ テーブル 数据表 表格 таблиц 테이블
report: bericht rapport informe relatorio rapporto raport 報告 レポート 报告 报表 отчет отчёт rapor$ 보고서
sales revenue: umsatz verkauf vente ventas vendas vendit omzet verkoop sprzedaz przychod 売上 销售 营收 销量 продаж выручк 매출 판매
customer client: kunde kunden client cliente klant klient 顧客 客户 клиент musteri buyer shopper subscriber 고객 kund$ kunder zakaznik
user: nutzer benutzer utilisateur usuario utente gebruiker uzytkown ユーザー 用户 пользовател
signup registration: registrier anmeldung inscri registro cadastr iscri aanmeld rejestr 登録 注册 регистрац
code program function: quellcode codigo codice programm programa funktion fonction funcion funcao funzion functie funkcj kod$ kodu$ コード 代码 程序 函数 関数 код$ кода$ функци script snippet 코드
bug error: fehler erreur errore fout$ fouten bład błąd błed バグ エラー 错误 漏洞 缺陷 ошибк hata$ hatas defect glitch crash 버그 오류 에러 chyba chyby
security vulnerability: sicherheit securit segurid seguranc sicurezz beveilig bezpiecz セキュリティ 脆弱性 安全 漏洞 безопасн уязвим vulnerab exploit 보안 sakerhet bezpecnost
improve refactor: verbesser refaktor amelior mejora melhor miglior rifattoriz verbeter ulepsz 改善 改进 优化 重构 リファクタ улучш рефактор optimiz optimise optimisa enhanc 개선 리팩토링
test: teste$ testen prueba pruebe testar testa$ testar 测试 テスト тест 테스트
advertising ad marketing: werbung werbe reklam anzeige publicit pubblicit anunci annunci advertent 広告 广告 реклам advert promot commercial 광고
slogan tagline: slogan eslogan werbespruch キャッチコピー 标语 口号 广告语 слоган 슬로건
campaign: kampagn campagn campana campanha kampani キャンペーン 活动 营销 кампани 캠페인
product: produkt produit producto produto prodott product$ 商品 製品 产品 продукт товар 제품 상품
description: beschreib descript descripcion descricao descrizion beschrijv opis$ opisu 描述 描写 описан
newsletter: nieuwsbrief boletin infolettre ニュースレター 简报 通讯 рассылк 뉴스레터
social media post: sozial social sociais sociale media$ beitrag publicacion publicacao 投稿 社交媒体 帖子 соцсет
brand: marke$ marque marca$ merk$ ブランド 品牌 бренд 브랜드
email letter message: mail$ lettre carta$ nachricht mensaje mensagem messaggio wiadomosc メール 邮件 信件 письм сообщен 이메일 메일
meeting: besprechung sitzung reunion reuniao riunion vergader spotkan 会議 会议 совещан встреч 회의
complaint: beschwerd reklamation plainte reclam klacht reklamacj 苦情 クレーム 投诉 жалоб sikayet grievance 불만 항의 klagomal stiznost
support helpdesk: kundendienst soporte suporte assistenza ondersteun wsparci サポート 客服 支持 поддержк
cancel cancellation: kundig storn annul anular cancelar opzeg anuluj rezygn 解約 キャンセル 取消 退订 отмен
order: bestellung commande pedido ordine bestelling zamowien 注文 订单 заказ siparis 주문 bestallning objednavk
delivery shipping: lieferung versand livraison entrega envio consegna spedizion levering bezorg dostaw 配送 配達 发货 快递 доставк teslimat kargo 배송 leverans doruc
account login: konto compte cuenta conta$ anmelden connexion accesso inlog zalogow logowan ログイン アカウント 账户 账号 登录 аккаунт учетн вход 계정 로그인
broken damaged: kaputt defekt beschadigt cass$ casse$ roto$ quebrad rotto kapot uszkodz zepsut 壊れ 故障 损坏 坏了 слома поврежд hasarl bozuk
urgent: dringend urgent urgente pilne pilny 至急 紧急 срочн 긴급
document: dokument document documento 文書 文档 文件 документ
text: texte texto testo tekst テキスト 文章 文本 текст metin 텍스트
article: artikel article articulo artigo articol artykul 記事 文章 статья статью makale 기사
notes: notiz notizen notas appunti aantekening notatk メモ 笔记 заметк
short brief: kurz court breve kort krotk 短く 簡潔 简短 кратк
idea brainstorm: idee ideen idea ideia ideas pomysł pomysl アイデア 想法 点子 主意 идеи идея
question: frage question pregunta pergunta domanda vraag pytani 質問 问题 вопрос 질문 fraga otazk
help: hilf hilfe aide$ aider ayuda ajuda aiuto hulp pomoc 手伝 帮助 帮我 помоги помощ
why: warum pourquoi porque perche waarom dlaczego なぜ 为什么 почему
joke: witz blague chiste piada barzellett grap$ grapje dowcip 冗談 ジョーク 笑话 шутк анекдот 농담
poem: gedicht poeme poema poesia wiersz 詩 诗 стих
story: geschichte histoire historia storia verhaal opowiad 物語 故事 истори
weather: wetter meteo clima tiempo$ weer$ pogod 天気 天气 погод 날씨
recipe: rezept recette receta receita ricetta recept przepis レシピ 食谱 菜谱 рецепт 레시피
schedule calendar appointment: termin$ termine$ terminvereinbar kalender calendrier calendario agenda afspraak 予定 日程 スケジュール 安排 日程 расписан
image picture: bild$ bilder image imagen imagem immagin afbeeld obraz 画像 图片 图像 изображен картин
design: entwurf diseno disegn ontwerp projekt 设计 デザイン дизайн
analyze analysis: analys analiz 分析 анализ
metric statistics: kennzahl metriq metrica metrich statisti estadistic estatistic statystyk 指標 统计 指标 метрик статистик
number count: anzahl zahlen numero cantidad quantidade aantal liczb 数量 件数 количеств число
average: durchschnitt moyenne promedio gemiddeld srednia 平均 среднее
list: liste lista lijst 一覧 列表 清单 список
sort: sortier trier ordenar ordinare ordina$ sorteer sortuj 並べ替え 排序 сортир
price: preis prix precio preco$ precos$ prezzo prijs cena$ ceny 価格 値段 价格 цена цены
payment: zahlung paiement pago$ pagamento betaling płatnosc platnosc 支払 付款 支付 оплат платеж
money: geld argent dinero dinheiro soldi pieniadz お金 钱 деньг денег
company business: unternehmen firma$ entreprise empresa azienda bedrijf 会社 企业 公司 компани
colleague team: kolleg collegue colega collega 同僚 同事 коллег
boss manager: chef$ jefe capo$ baas$ szef 上司 老板 经理 начальник
plan planning: planung planif planific pianific planen 計画 计划 план
presentation: prasentation presentation presentacion apresentacao presentazion presentatie prezentacj プレゼン 演示 презентац
app application software: anwendung aplicacion aplicativo applicazion toepassing aplikacj アプリ 应用 软件 приложен
file: datei fichier archivo arquivo bestand plik$ pliku ファイル 文件 файл
english: englisch anglais ingles inglese engels angielsk 英語 英语 английск 영어
german: deutsch allemand aleman alemao tedesco duits niemieck ドイツ語 德语 немецк 독일어
french: franzosisch francais frances francese frans$ francusk フランス語 法语 французск 프랑스어
spanish: spanisch espagnol espanol spagnol spaans hiszpansk スペイン語 西班牙语 испанск 스페인어
italian: italienisch italien italiano italiaans wlosk włosk イタリア語 意大利语 итальянск 이탈리아어
portuguese: portugiesisch portugais portugues portoghese portugees portugalsk ポルトガル語 葡萄牙语 португальск
japanese: japanisch japonais japones giappones japans$ japonsk 日本語 日语 японск 일본어
chinese: chinesisch chinois chino$ chines cinese chinees chinsk 中国語 中文 汉语 китайск 중국어
dutch: niederland hollandais neerlandes olandese nederlands niderlandzk オランダ語 荷兰语 нидерландск
polish: polnisch polonais polaco polacco polsk ポーランド語 波兰语 польск
korean: koreanisch coreen coreano coreaans koreansk 韓国語 韩语 корейск 한국어
russian: russisch russe$ ruso$ russo$ rosyjsk ロシア語 俄语 русск
book booking reservation: buchen buchung reservier reserv prenot boek$ boeken rezerw 予約 预订 预约 брон
flight: flug$ fluge flugh vol$ vols$ vuelo voo$ voos$ volo$ voli$ vlucht lotu$ 航空券 フライト 航班 机票 рейс перелет
hotel: ホテル 酒店 宾馆 отель гостиниц
health medical: gesundheit medizin sante$ salud saude salute$ gezondheid zdrow 健康 医療 医疗 здоров медицин
doctor: arzt arzte medecin medico dokter lekarz 医者 医師 医生 врач
symptom: symptom sintom objaw 症状 симптом
patient: patient paciente paziente pacjent 患者 病人 пациент
insurance: versicher assurance seguro$ seguros assicuraz verzeker ubezpiecz 保険 保险 страхов
claim damage: schaden schadens sinistre siniestro sinistro schade$ szkod 理赔 损失 убыт
accounting bookkeeping: buchhalt comptab contabil boekhoud ksiegow księgow 会計 簿記 会计 бухгалт
budget: presupuest orcament begroting budzet budżet 予算 预算 бюджет
forecast prediction: prognos prevision previs voorspel prognoz 予測 预测 прогноз
transaction: transaktion transaccion transacao transazion transactie transakcj 取引 交易 транзакц
inventory stock: lager$ lagerbestand inventar inventaire inventario voorraad zapas 在庫 库存 запас
warehouse: entrepot almacen armazem magazzin magazijn magazyn 倉庫 仓库 склад
package parcel: paket colis paquete pacote pacco pakket paczk 荷物 小包 包裹 посылк
supplier vendor: lieferant fournisseur proveedor fornecedor fornitor leverancier dostawc 仕入先 サプライヤー 供应商 поставщик
purchase buy: kaufen einkauf achat achet compra$ comprar acquist kopen kupic kupno 購入 购买 采购 покуп закуп
discount: rabatt remise descuento desconto sconto korting rabat$ 割引 折扣 скидк
shop store: geschaft magasin boutique tienda loja$ negozio winkel sklep 店舗 商店 магазин
server: サーバ 服务器 сервер
deploy deployment: bereitstell deploie deployer despleg 部署 デプロイ разверт
network: netzwerk reseau rede$ rete$ netwerk siec$ sieci ネットワーク 网络 сеть сети
password: passwort contrasena senha wachtwoord haslo hasło パスワード 密码 пароль
install setup: installier installer instalar installare installeer instalacj instaluj インストール 安装 установ
computer: ordinateur ordenador computador rechner komputer パソコン 电脑 компьютер
phone: telefon telephone telefono telefone 電話 电话 телефон
learn learning: lernen apprend aprend impara leren uczyc nauczyc 学習 学ぶ 学习 изуч учить
course: kurs$ kursu cours$ curso$ cursos corso$ corsi$ cursus 講座 コース 课程 курс
lesson teach: unterricht lecon leccion licao lezion lekcj 授業 课程 урок
exam: prufung examen exame$ esame egzamin 試験 考试 экзамен
homework: hausaufgab devoirs compiti huiswerk 宿題 作业 домашн
student: etudiant estudiante estudante studente 学生 студент
math: mathe$ mathemat matemat wiskunde 数学 математ
equation: gleichung ecuacion equacao equazion rownan 方程 уравнен
video: vidéo 動画 视频 видео
photo: foto$ fotos 写真 照片 фото
song music: lied$ lieder chanson cancion cancao canzon liedje piosenk musik musique musica muziek muzyk 歌曲 音楽 音乐 песн музык
slides: folien diapo diapositiva slajd スライド 幻灯片 слайд
spreadsheet: tabellenkalkulation tableur planilha arkusz スプレッドシート 电子表格 электронн
chart graph: diagramm graphique grafico grafiek wykres グラフ 图表 график диаграмм
outage incident: storung ausfall panne incidente caida awaria 障害 事故 故障 сбой авари
feedback rating: bewertung avis$ resena avaliacao recensione beoordeling opinia recenzj 評価 评价 反馈 отзыв
survey: umfrage sondage encuesta sondaggio enquete ankiet アンケート 问卷 опрос
press release: pressemitteil communique comunicado comunicato persbericht プレスリリース 新闻稿 пресс
gdpr privacy: dsgvo rgpd datenschutz privacidad privacidade prywatnosc rodo$ 個人情報 隐私 персональн
vacation leave: urlaub conge vacaciones ferias ferie$ verlof vakantie urlop 休暇 休假 假期 отпуск
sick illness: krank malad enferm doente doenca malattia ziek$ ziekte chor$ choroba 病気 病假 生病 болезн больнич
training: schulung formacion formacao formazione opleiding szkolen 培训 トレーニング обучен тренинг
project: projekt projet proyecto projeto progetto プロジェクト 项目 проект
task: aufgabe tache tarea tarefa compito taak zadani タスク 任务 задач
deadline: frist$ fristen echeance plazo prazo scadenza termijn 締め切り 締切 截止 срок дедлайн
minutes: protokoll verbale notulen protokol 議事録 会议记录 纪要 протокол
restaurant: restaurante ristorante レストラン 餐厅 饭店 ресторан
food: lebensmittel nourriture comida cibo$ eten$ jedzeni 食べ物 食物 еда
sport exercise: deporte esporte allenament 运动 スポーツ спорт
news: actualite noticias notizie nieuws ニュース 新闻 новост
gift: geschenk cadeau regalo prezent 贈り物 プレゼント 礼物 подар
car: voiture coche$ carro$ macchina samochod 自動車 汽车 машин
rent lease: miete mietvertrag loyer alquiler aluguel affitto huur$ czynsz najem 家賃 租金 房租 аренд
apartment: wohnung appartement apartamento appartamento mieszkan アパート 公寓 квартир
grammar: grammatik grammaire gramatica grammatica gramatyk 文法 语法 граммат
spelling: rechtschreib orthograph ortograf spelling pisown 綴り 拼写 орфограф
correct fix proofread: korrigier corrig correg korekt 添削 校正 校对 исправ
rewrite rephrase: umformulier umschreib reformul parafras herformul przeredag 書き直 改写 перепиш перефраз
repair fix: reparier repar ripar repareer napraw 修理 修复 почин ремонт
convert conversion: umrechn umwandl convert omreken przelicz 換算 変換 转换 换算 конверт
percent percentage: prozent pourcent porcentaje porcentagem percentual percentuale procent パーセント 百分比 процент
interest rate: zinsen zinssatz interet interes$ juros interessi odsetk 金利 利息 利率 ставк
loan credit: kredit darlehen pret$ prestamo emprestimo prestito lening pozyczk kredyt ローン 融資 贷款 кредит
pension retirement: rente$ retraite jubilacion aposentadoria pensione pensioen emerytur 年金 养老金 пенси
"""
